// Package proc will hold GSV's agent processes: conversations, the message
// queue, the agent loop, human-in-the-loop approvals and history lifecycle,
// registered with the kernel as proc.* syscalls and the /proc subtree.
// Nothing is implemented yet; see the project's processes issue.
package proc
