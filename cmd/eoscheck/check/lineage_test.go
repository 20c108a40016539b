package check

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// Lineage reads the compact processor.source header as well as the
// legacy three, and refuses a malformed compact value.
func TestLineageCompact(t *testing.T) {
	good := &kgo.Record{Headers: record.LineageHeaders(record.Source{Topic: "in", Partition: 3, Offset: 42})}
	if got, ok := Lineage(good); !ok || got != (Input{"in", 3, 42}) {
		t.Errorf("Lineage = %v %v", got, ok)
	}
	for _, v := range []string{"", "in/3", "in/3/x", "in/-1/42", "/3/42", "in/3/42/1"} {
		r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: record.HeaderSource, Value: []byte(v)}}}
		if got, ok := Lineage(r); ok || got != (Input{}) {
			t.Errorf("%q: Lineage = %v %v", v, got, ok)
		}
	}
}

// restamp rewrites the lineage of outputs to form: compact, legacy, or
// mixed (every other record compact).
func restamp(form string) func([]*kgo.Record) []*kgo.Record {
	return func(all []*kgo.Record) []*kgo.Record {
		for i, r := range all {
			src, ok := record.Lineage(r.Headers)
			if !ok {
				panic(fmt.Sprintf("scenario output without lineage: %v", r.Headers))
			}
			if form == "legacy" || (form == "mixed" && i%2 == 1) {
				r.Headers = record.LegacyLineageHeaders(src)
			} else {
				r.Headers = record.LineageHeaders(src)
			}
		}
		return all
	}
}

// A run whose outputs carry lineage in either form, or in both mixed (as
// when PROCESSOR_LINEAGE_HEADERS changed between two runs), reads as the
// same clean run; a malformed compact value is a phantom.
func TestReadEachLineageForm(t *testing.T) {
	e := newEnv(t)
	for _, form := range []string{"compact", "legacy", "mixed"} {
		src := e.scenario("lf-"+form+"-", restamp(form))
		rep := Check(e.read(src), strict)
		expect(t, rep, nil)
		if rep.Inputs != 25 || rep.OutputsVisible != 25 {
			t.Errorf("%s: inputs %d, visible outputs %d; want 25 and 25", form, rep.Inputs, rep.OutputsVisible)
		}
	}
	src := e.scenario("lf-bad-", func(all []*kgo.Record) []*kgo.Record {
		all = restamp("compact")(all)
		all[0].Headers = []kgo.RecordHeader{{Key: record.HeaderSource, Value: []byte("lf-bad-in/0/01")}}
		return all
	})
	expect(t, Check(e.read(src), strict), map[Anomaly]int{Phantom: 1, Lost: 1})
}
