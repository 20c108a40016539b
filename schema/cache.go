package schema

import (
	"container/list"
	"context"
	"sync"
)

// Cache is a bounded map from schema id to a compiled value V that
// evicts the least recently used entry, and that makes one call of the
// loader however many goroutines ask for one missing id at once. Failed
// loads are not kept, so a registry that was down is asked again.
type Cache[V any] struct {
	mu      sync.Mutex
	max     int
	entries map[int]*list.Element // of *cacheEntry[V]
	order   *list.List            // front: most recently used
	loading map[int]*cacheLoad[V]
}

// cacheEntry is one kept value.
type cacheEntry[V any] struct {
	id int
	v  V
}

// cacheLoad is a load under way; done is closed when v and err are set.
type cacheLoad[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// NewCache returns a Cache that keeps at most max values (at least 1).
func NewCache[V any](max int) *Cache[V] {
	if max < 1 {
		max = 1
	}
	return &Cache[V]{max: max, entries: make(map[int]*list.Element), order: list.New(), loading: make(map[int]*cacheLoad[V])}
}

// Len returns how many values are kept.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Get returns the value for id, calling load once for all the callers
// that ask for it while it is missing. A caller whose ctx ends while
// another's load is under way returns ctx's error.
func (c *Cache[V]) Get(ctx context.Context, id int, load func(context.Context) (V, error)) (V, error) {
	c.mu.Lock()
	if el, ok := c.entries[id]; ok {
		c.order.MoveToFront(el)
		v := el.Value.(*cacheEntry[V]).v
		c.mu.Unlock()
		return v, nil
	}
	if l, ok := c.loading[id]; ok {
		c.mu.Unlock()
		select {
		case <-l.done:
			return l.v, l.err
		case <-ctx.Done():
			var zero V
			return zero, faultf(FaultRegistry, "waiting for schema id %d: %w", id, ctx.Err())
		}
	}
	l := &cacheLoad[V]{done: make(chan struct{})}
	c.loading[id] = l
	c.mu.Unlock()

	l.v, l.err = load(ctx)

	c.mu.Lock()
	delete(c.loading, id)
	if l.err == nil {
		c.put(id, l.v)
	}
	c.mu.Unlock()
	close(l.done)
	return l.v, l.err
}

// put keeps v for id, evicting the least recently used value when full;
// c.mu is held.
func (c *Cache[V]) put(id int, v V) {
	if el, ok := c.entries[id]; ok {
		el.Value.(*cacheEntry[V]).v = v
		c.order.MoveToFront(el)
		return
	}
	c.entries[id] = c.order.PushFront(&cacheEntry[V]{id: id, v: v})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry[V]).id)
	}
}
