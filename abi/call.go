package abi

import "reflect"

// Grant says who, besides root and the kernel, may make a syscall. The
// kernel derives every identity's capabilities from the grants of the
// syscalls registered with it: no room writes a grant into a table.
type Grant uint8

const (
	// Root is the zero Grant: root and the kernel only.
	Root Grant = 0
	// Users grants the syscall to every member of the users group, in
	// whatever role it attached (a user, a service or a driver token).
	Users Grant = 1 << iota
	// Strangers grants it also to nobody: a host user with no account,
	// whose FUSE access the others' permission bits decide. Only reads
	// carry it.
	Strangers
	// Adapters grants the syscall to a service token bound to a chat
	// adapter (gsv token create --kind service --adapter KIND): such a
	// token may make only the syscalls that carry this bit.
	Adapters
)

// CallFlags say how a syscall is called.
type CallFlags uint8

const (
	// KernelOnly syscalls are refused (403) to every caller but the kernel
	// itself, root included.
	KernelOnly CallFlags = 1 << iota
	// Internal syscalls take and return Go values, not JSON: they serve
	// the namespace's own nodes and are unknown (400) to request frames.
	Internal
	// BeforeSetup syscalls may run while the system is not set up.
	BeforeSetup
	// Read syscalls change no state and reach nothing outside the
	// daemon: the audit log leaves them out unless reads are audited
	// (config/audit/reads). A syscall without it is audited; see
	// Audited for the reads declared before the flag.
	Read
	// Data syscalls move bytes on a handle another, audited, syscall
	// opened (fs.pread, fs.pwrite): the audit log records the open,
	// not each transfer.
	Data
)

// Desc is what every syscall descriptor tells about itself, whatever its
// argument and result types: the kernel's table, the schemas and the
// completion list are made from it.
type Desc interface {
	// CallName is the syscall's name, as request frames carry it.
	CallName() string
	// CallGrant is who besides root may make it.
	CallGrant() Grant
	// CallFlags is how it is called.
	CallFlags() CallFlags
	// CallDoc is its one-paragraph description.
	CallDoc() string
	// ArgsType and ResultType are the Go types of its args (A, never a
	// pointer) and its result (R).
	ArgsType() reflect.Type
	ResultType() reflect.Type
}

// Call is the descriptor of a syscall that takes args A and answers R: the
// one place its name, its grant and its types are written. A room serves
// it with kernel.Handle; a caller makes it with kernel.Do, which checks at
// compile time that args and result are the types the handler has.
type Call[A, R any] struct {
	Name  string
	Grant Grant
	Flags CallFlags
	Doc   string
}

// CallName returns c.Name.
func (c Call[A, R]) CallName() string { return c.Name }

// CallGrant returns c.Grant.
func (c Call[A, R]) CallGrant() Grant { return c.Grant }

// CallFlags returns c.Flags.
func (c Call[A, R]) CallFlags() CallFlags { return c.Flags }

// CallDoc returns c.Doc.
func (c Call[A, R]) CallDoc() string { return c.Doc }

// ArgsType returns the type A.
func (c Call[A, R]) ArgsType() reflect.Type { return reflect.TypeFor[A]() }

// ResultType returns the type R.
func (c Call[A, R]) ResultType() reflect.Type { return reflect.TypeFor[R]() }

var _ Desc = Call[struct{}, struct{}]{}

// Signal is the descriptor of a signal whose payload is P: its name, and
// the one type its payload has. kernel.Publish takes a P.
type Signal[P any] struct {
	Name string
	Doc  string
}

// Scoped is a signal payload that belongs to a process: its pid, and the
// conversation when it names one. The kernel copies both into the
// signal's envelope when it is published, so that no filter opens a
// payload to find them.
type Scoped interface {
	SignalScope() (pid, conv string)
}
