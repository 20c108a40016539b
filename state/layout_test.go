package state

import "testing"

// topicHash is the layout's: a store written by one build must be read
// by the next, so its values are pinned (xxHash64, seed 0; the empty
// string's is the algorithm's published one).
func TestTopicHashIsPinned(t *testing.T) {
	for topic, want := range map[string]uint64{
		"": 0xef46db3751d8e999,
		"bench-20261206-174152-100-100ms-restore-wiped-r2-aggregate-changelog": 0x94f3776e8d891149,
	} {
		if got := topicHash(topic); got != want {
			t.Errorf("topicHash(%q) = %#x, want %#x", topic, got, want)
		}
		if p := (part{topic, 7}).prefix(); len(p) != prefixLen || p[0] != layoutTag {
			t.Errorf("prefix of %q: %x", topic, p)
		}
	}
}
