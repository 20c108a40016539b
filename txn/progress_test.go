package txn

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// randomProgress is a Progress that String can encode: a crash count (or
// none), its window, maybe a solo record, and maybe fields of later
// versions.
func randomProgress(r *rand.Rand) Progress {
	var p Progress
	if r.IntN(4) > 0 {
		p.Crashes = 1 + r.IntN(100)
		p.At = r.Int64N(1 << 40)
		if r.IntN(8) == 0 {
			p.At = 0
		}
		p.Extent = p.At + r.Int64N(1<<20)
		if r.IntN(2) == 0 {
			p.Solo, p.Alone = p.At+r.Int64N(p.Extent-p.At+1), true
		}
	}
	if r.IntN(2) == 0 {
		p.Time, p.TimeAt, p.Timed = r.Int64N(1<<45), r.Int64N(1<<40), true
	}
	for range r.IntN(3) {
		name := strings.Repeat(string(rune('f'+r.IntN(20))), 1+r.IntN(3))
		if name == "c" || name == "e" || name == "s" || name == "t" {
			name = "u"
		}
		p.extra = append(p.extra, name+"="+strconv.FormatInt(r.Int64N(1<<50), 10))
	}
	return p
}

// Every Progress that says something reads back the same from its
// string; nothing known encodes as "" and reads back as nothing known.
func TestProgressRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20_000 {
		p := randomProgress(r)
		s := p.String()
		got := ParseProgress(s)
		if !reflect.DeepEqual(got, p) && (p.Known() || got.Known()) {
			t.Fatalf("case %d: %q read back as %#v, want %#v", i, s, got, p)
		}
		if len(s) > 200 {
			t.Fatalf("case %d: %q is %d bytes, more than a compact format needs", i, s, len(s))
		}
	}
	if s := (Progress{}).String(); s != "" {
		t.Errorf("nothing known encodes as %q, want \"\"", s)
	}
}

// The examples of the documentation (docs/design.md), both ways.
func TestProgressExamples(t *testing.T) {
	for _, c := range []struct {
		s    string
		want Progress
	}{
		{"sp1;c=2@1200;e=1450", Progress{Crashes: 2, At: 1200, Extent: 1450}},
		{"sp1;c=3@1300;e=1450;s=1302", Progress{Crashes: 3, At: 1300, Extent: 1450, Solo: 1302, Alone: true}},
		{"sp1;c=3@1300;e=1450;t=1733450000000@1300", Progress{Crashes: 3, At: 1300, Extent: 1450, Time: 1733450000000, TimeAt: 1300, Timed: true}},
		{"sp1;t=1733450000000@1300", Progress{Time: 1733450000000, TimeAt: 1300, Timed: true}},
		{"sp1;t=5@9;u=1", Progress{Time: 5, TimeAt: 9, Timed: true, extra: []string{"u=1"}}},
	} {
		if got := ParseProgress(c.s); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q read as %#v, want %#v", c.s, got, c.want)
		}
		if got := c.want.String(); got != c.s {
			t.Errorf("%#v encodes as %q, want %q", c.want, got, c.s)
		}
	}
}

// What others write, or a damaged string, reads as nothing known (or, for
// a field of this version that does not parse, as no crash count), never
// as an error or a panic.
func TestProgressForeign(t *testing.T) {
	for _, s := range []string{
		"", "processor-8f0e7c1a-33c1-4c2c-8d52-5c1f0a9f2b1e", // franz-go's default: the member ID
		"AQAAAZOPt1wA", // Kafka Streams' base64 stream time
		"sp1;", "sp1;;", "sp2;c=1@0;e=0", "sp1x;c=1@0;e=0", "sp1;c=1@0", "sp1;c=0@5;e=5", "sp1;c=1@-1;e=3",
		"sp1;c=1@5;e=4", "sp1;c=2@5;e=9;s=10", "sp1;c=2@5;e=9;s=4", "sp1;c=x@5;e=9", "sp1;c=1@5;c=1@5;e=9",
		"sp1;C=1@5;e=9", "sp1;c=1@5;e=9;=x", "sp1;c=1@5;e=9;toolongname=1", strings.Repeat("sp1;t=1", 1000),
	} {
		if p := ParseProgress(s); p.Crashes != 0 || p.Alone {
			t.Errorf("%q read as %#v, want no crash count", s, p)
		}
	}
}

// FuzzProgress: any string parses without panicking, and what it parses
// to reads back the same from its own encoding.
func FuzzProgress(f *testing.F) {
	for _, s := range []string{"", "sp1;c=2@1200;e=1450", "sp1;c=3@1300;e=1450;s=1302;t=17", "member-1", "sp1;x=;y=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := ParseProgress(s)
		if p.Crashes < 0 || (p.Crashes > 0 && (p.At < 0 || p.Extent < p.At)) {
			t.Fatalf("%q read as an impossible %#v", s, p)
		}
		again := ParseProgress(p.String())
		if !reflect.DeepEqual(again, p) && (p.Known() || again.Known()) {
			t.Fatalf("%q read as %#v, whose encoding %q reads as %#v", s, p, p.String(), again)
		}
	})
}

// A stream time that does not parse, is negative, is given twice or has
// no offset reads as unknown; the crash count beside it stands.
func TestProgressTimeForeign(t *testing.T) {
	for _, s := range []string{"sp1;t=17", "sp1;t=-1@5", "sp1;t=1@-5", "sp1;t=x@5", "sp1;t=1@5;t=1@5", "sp1;t=@", "sp1;t=1e3@5",
		"sp1;c=2@5;e=9;t=99999999999999999999@5"} {
		p := ParseProgress(s)
		if p.Timed {
			t.Errorf("%q read as %#v, want no stream time", s, p)
		}
		if strings.HasPrefix(s, "sp1;c=2") && p.Crashes != 2 {
			t.Errorf("%q lost its crash count: %#v", s, p)
		}
	}
	if tm, ok := ParseProgress("sp1;t=42@7").TimeAtOffset(8); ok {
		t.Errorf("a stream time of offset 7 read at offset 8 as %d", tm)
	}
	if tm, ok := ParseProgress("sp1;t=42@7").TimeAtOffset(7); !ok || tm != 42 {
		t.Errorf("stream time at offset 7 read as %d, %t; want 42", tm, ok)
	}
}

// TestProgressDetached: a moved offset keeps others' fields and drops
// the crash count and the stream time, which belonged to the old offset.
func TestProgressDetached(t *testing.T) {
	for in, want := range map[string]string{
		"sp1;c=2@10;e=12;t=5@10;u=1": "sp1;u=1",
		"sp1;t=5@10":                 "",
		"other tool's":               "",
		"":                           "",
	} {
		if got := ParseProgress(in).Detached().String(); got != want {
			t.Errorf("ParseProgress(%q).Detached() = %q, want %q", in, got, want)
		}
	}
}
