package srserver

import (
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/avro"
)

// TestCompatHambaDifferential compares twmb/avro's CheckCompatibility
// with hamba/avro's SchemaCompatibility on random schema evolutions.
func TestCompatHambaDifferential(t *testing.T) {
	var agree, differ int
	for seed := uint64(0); seed < 40000; seed++ {
		wt, rt := compatPair(seed)
		hw, err1 := hamba.Parse(wt)
		hr, err2 := hamba.Parse(rt)
		tw, err3 := avro.Parse(wt)
		tr, err4 := avro.Parse(rt)
		if (err1 == nil) != (err3 == nil) || (err2 == nil) != (err4 == nil) {
			t.Logf("parse differs: %s / %s: %v %v %v %v", wt, rt, err1, err3, err2, err4)
			continue
		}
		if err1 != nil || err2 != nil {
			continue
		}
		h := hamba.NewSchemaCompatibility().Compatible(hr, hw)
		w := avroReads(tw, tr)
		if (h == nil) != (w == nil) {
			differ++
			if differ < 10 {
				t.Errorf("writer %s reader %s: hamba %v, twmb %v", wt, rt, h, w)
			}
			continue
		}
		agree++
	}
	t.Logf("%d pairs agree, %d differ", agree, differ)
}
