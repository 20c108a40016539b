package schema

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCacheEvictsLeastRecentlyUsed checks the bound and the order.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := NewCache[string](2)
	loads := 0
	get := func(id int) string {
		v, err := c.Get(context.Background(), id, func(context.Context) (string, error) {
			loads++
			return "v" + string(rune('0'+id)), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	get(1)
	get(2)
	get(1)
	get(3) // evicts 2
	if c.Len() != 2 {
		t.Fatalf("Len %d, want 2", c.Len())
	}
	if loads != 3 {
		t.Fatalf("%d loads, want 3", loads)
	}
	if get(1) != "v1" || loads != 3 {
		t.Errorf("1 was evicted")
	}
	get(2)
	if loads != 4 {
		t.Errorf("2 was kept past the bound")
	}
}

// TestCacheKeepsNoFailure checks that a failed load is tried again, and
// that a waiter whose context ends returns.
func TestCacheKeepsNoFailure(t *testing.T) {
	c := NewCache[int](0)
	boom := errors.New("boom")
	if _, err := c.Get(context.Background(), 1, func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	v, err := c.Get(context.Background(), 1, func(context.Context) (int, error) { return 7, nil })
	if err != nil || v != 7 {
		t.Fatalf("after a failure: %d, %v", v, err)
	}

	release := make(chan struct{})
	started := make(chan struct{})
	go c.Get(context.Background(), 2, func(context.Context) (int, error) {
		close(started)
		<-release
		return 2, nil
	})
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = c.Get(ctx, 2, func(context.Context) (int, error) { t.Error("a second load of one id"); return 0, nil })
	if FaultOf(err) != FaultRegistry || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiter's error %v", err)
	}
	close(release)
}

// TestFormatsAndFaults checks ParseFormat, RegistryType and FaultOf.
func TestFormatsAndFaults(t *testing.T) {
	for _, f := range []Format{Raw, Avro, Protobuf, JSONSchema} {
		got, err := ParseFormat(string(f))
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	_, err := ParseFormat("json")
	if err == nil || err.Error() != `unknown format "json": accepted values are raw, avro, protobuf, json_schema` {
		t.Errorf("ParseFormat(json): %v", err)
	}
	if Protobuf.RegistryType().String() != "PROTOBUF" || JSONSchema.RegistryType().String() != "JSON" || Avro.RegistryType().String() != "AVRO" {
		t.Errorf("RegistryType: %v %v %v", Protobuf.RegistryType(), JSONSchema.RegistryType(), Avro.RegistryType())
	}
	inner := faultf(FaultCredentials, "no")
	wrapped := errors.Join(errors.New("x"), inner)
	if FaultOf(wrapped) != FaultCredentials || FaultOf(errors.New("plain")) != "" || FaultOf(nil) != "" {
		t.Errorf("FaultOf")
	}
	if got := withContext(FaultRegistry, inner, "fetching %d", 3); FaultOf(got) != FaultCredentials || got.Error() != "fetching 3: no" {
		t.Errorf("withContext: %v (%s)", got, FaultOf(got))
	}
}
