package state

import (
	"hash/fnv"
	"testing"
)

// topicHash is hash/fnv's FNV-1a 64: the layout names it, and a store
// written by one build must be read by the next.
func TestTopicHashIsFNV1a(t *testing.T) {
	for _, topic := range []string{"", "a", "g-s-changelog", "bench-0123456789-100-100ms-restore-wiped-r0-aggregate-changelog"} {
		h := fnv.New64a()
		_, _ = h.Write([]byte(topic))
		if got, want := topicHash(topic), h.Sum64(); got != want {
			t.Errorf("topicHash(%q) = %x, want %x", topic, got, want)
		}
		if p := (part{topic, 7}).prefix(); len(p) != prefixLen || p[0] != layoutTag {
			t.Errorf("prefix of %q: %x", topic, p)
		}
	}
}
