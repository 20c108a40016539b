package state

import (
	"fmt"
	"sort"
)

// Commit applies t to the local database once its Kafka transaction has
// committed: every partition written, with its new checkpoint (the offset
// after its last changelog record, which is the commit marker's) and
// counts, in one atomic batch. Call it after End reported the commit and
// before the next Begin; the records Records returned must all be
// acknowledged (their offsets set).
//
// On an error nothing is applied and the partitions written are marked
// not restored, since their local state is now behind the changelog:
// Restore them (it reads the tail from the checkpoint) before they are
// used again.
func (t *Txn) Commit() error {
	if t.ended.Swap(true) {
		return ErrTxnEnded
	}
	defer t.release()
	t.Records() // seals; a transaction that never asked has no records produced
	if len(t.recs) == 0 {
		return nil
	}
	byPart, err := t.collect()
	if err == nil {
		err = t.apply(byPart)
	}
	if err != nil {
		t.m.mu.Lock()
		for p := range byPart {
			if pi := t.m.parts[p]; pi != nil {
				pi.ready = false
			}
		}
		t.m.mu.Unlock()
	}
	return err
}

// collect groups the acknowledged records by partition, with the offset
// after the last of each.
func (t *Txn) collect() (map[part]*partWrites, error) {
	byPart := map[part]*partWrites{}
	for i, r := range t.recs {
		p := part{r.Topic, r.Partition}
		if p != t.parts[i] { // marked not restored with the rest on the error below
			byPart[t.parts[i]] = &partWrites{p: t.parts[i]}
		}
		pw := byPart[p]
		if pw == nil {
			pw = &partWrites{p: p}
			byPart[p] = pw
		}
		if r.Offset < 0 {
			return byPart, fmt.Errorf("state: commit of %s/%d: a changelog record was not acknowledged (not produced, or produced as a copy)", r.Topic, r.Partition)
		}
		if p != t.parts[i] {
			return byPart, fmt.Errorf("state: commit: a changelog record of %s/%d landed in %s/%d (the producer's partitioner must keep the record's partition)", t.parts[i].topic, t.parts[i].partition, r.Topic, r.Partition)
		}
		pw.cp.next = max(pw.cp.next, r.Offset+1)
		pr := t.priors[i]
		pw.writes = append(pw.writes, write{key: r.Key, enc: r.Value,
			known: pr.known, had: pr.had, oldExp: pr.oldExp, oldLen: int(pr.oldLen)})
	}
	return byPart, nil
}

// apply writes byPart in one batch and publishes the new counts and
// checkpoints.
func (t *Txn) apply(byPart map[part]*partWrites) error {
	m := t.m
	list := make([]partWrites, 0, len(byPart))
	m.mu.RLock()
	for p, pw := range byPart {
		pi := m.parts[p]
		if pi == nil {
			m.mu.RUnlock()
			return fmt.Errorf("state: commit: %s/%d is not a partition of this manager", p.topic, p.partition)
		}
		pw.before = pi.st
		pw.cp.topicID = m.topicIDs[p.topic]
		if pw.cp.next < pi.st.cp.next {
			m.mu.RUnlock()
			return fmt.Errorf("state: commit: %s/%d would move its checkpoint back from %d to %d", p.topic, p.partition, pi.st.cp.next, pw.cp.next)
		}
		list = append(list, *pw)
	}
	m.mu.RUnlock()
	sort.Slice(list, func(i, j int) bool { // a stable order of batches, for tests and profiles
		if list[i].p.topic != list[j].p.topic {
			return list[i].p.topic < list[j].p.topic
		}
		return list[i].p.partition < list[j].p.partition
	})
	sts, err := m.db.apply(list, true)
	if err != nil {
		return err
	}
	m.mu.Lock()
	for i, pw := range list {
		m.parts[pw.p].st = sts[i]
	}
	m.mu.Unlock()
	return nil
}
