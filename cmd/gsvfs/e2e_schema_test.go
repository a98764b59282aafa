package main_test

// The schemas of every syscall the daemon registers, whichever room
// registers it: made in process on the rooms gsvfs wires.

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/abi/schema"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/ipc"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/notify"
	"gsvfs.dev/gsvfs/ns"
	gproc "gsvfs.dev/gsvfs/proc"
	"gsvfs.dev/gsvfs/sched"
)

// Every registered descriptor has schemas (an internal one none, by
// design): they resolve, and admit the JSON of its zero args and of its
// zero result, as encoding/json writes them.
func TestE2ESchemasOfEveryDescriptor(t *testing.T) {
	e := kerneltest.Open(t)
	ctx := context.Background()
	space := ns.New(e.K)
	t.Cleanup(func() { space.Close() })
	dev, err := devices.New(e.K, devices.Options{Space: space, Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	dev.SetRoot(space.Root())
	opens := []func() (ns.Room, error){
		func() (ns.Room, error) { return dev, nil },
		func() (ns.Room, error) { return gproc.Open(space, gproc.Options{Logger: kerneltest.Quiet()}) },
		func() (ns.Room, error) { return ipc.Open(space, ipc.Options{Logger: kerneltest.Quiet()}) },
		func() (ns.Room, error) { return sched.Open(space, sched.Options{Logger: kerneltest.Quiet()}) },
		func() (ns.Room, error) { return notify.Open(space, notify.Options{Logger: kerneltest.Quiet()}) },
	}
	for _, open := range opens {
		room, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if err := space.Add(ctx, room); err != nil {
			t.Fatal(err)
		}
	}
	descs := e.K.Descs()
	if len(descs) == 0 {
		t.Fatal("no descriptor registered")
	}
	admits := func(s *jsonschema.Schema, v any) error {
		rs, err := s.Resolve(nil)
		if err != nil {
			return err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			return err
		}
		if err := rs.Validate(doc); err != nil {
			return errors.New(string(b) + ": " + err.Error())
		}
		return nil
	}
	for _, d := range descs {
		s, err := schema.Of(d)
		if d.CallFlags()&abi.Internal != 0 {
			if !errors.Is(err, schema.ErrInternal) {
				t.Errorf("%s (internal): %v", d.CallName(), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", d.CallName(), err)
			continue
		}
		if s.Args.Type != "object" {
			t.Errorf("%s: args of type %q, want an object", d.CallName(), s.Args.Type)
		}
		if err := admits(s.Args, reflect.New(d.ArgsType()).Interface()); err != nil {
			t.Errorf("%s: its zero args: %v", d.CallName(), err)
		}
		rt := d.ResultType()
		if rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		if err := admits(s.Result, reflect.New(rt).Interface()); err != nil {
			t.Errorf("%s: its zero result: %v", d.CallName(), err)
		}
	}
	t.Logf("%d descriptors", len(descs))
}
