package guest

import "testing"

func TestHandleTwicePanics(t *testing.T) {
	defer func() { handler = nil }()
	Handle(func(in Record) ([]Record, error) { return []Record{in}, nil })
	defer func() {
		if recover() == nil {
			t.Error("a second Handle should panic")
		}
	}()
	Handle(func(Record) ([]Record, error) { return nil, nil })
}
