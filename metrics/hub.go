package metrics

import (
	"encoding/json"
	"sync"

	"github.com/memd-dev/memd/metrics/statusline"
)

// subscriberBuffer is how many events a subscriber may fall behind before the oldest is
// dropped: the newest state is what matters, and the publisher must never wait on a reader.
const subscriberBuffer = 8

// Event is one published document, encoded once for every subscriber.
type Event struct {
	ID   uint64
	Data []byte // the document as one line of JSON
}

// Hub fans published status documents out to SSE subscribers and keeps the latest for
// /status.json and the page. Publish never blocks.
type Hub struct {
	mu      sync.Mutex
	latest  *Event
	doc     *statusline.Document
	seq     uint64
	subs    map[chan Event]struct{}
	dropped uint64
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[chan Event]struct{}{}} }

// Publish makes d the latest document and queues it for every subscriber. A subscriber whose
// buffer is full loses its oldest queued event, never the new one.
func (h *Hub) Publish(d statusline.Document) {
	b, err := json.Marshal(d)
	if err != nil { // a Document always encodes; keep the last good one if not
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	ev := Event{ID: h.seq, Data: b}
	h.latest = &ev
	h.doc = &d
	for ch := range h.subs {
		h.offer(ch, ev)
	}
}

// offer queues ev without blocking; called with h.mu held, so this is the only sender.
func (h *Hub) offer(ch chan Event, ev Event) {
	for {
		select {
		case ch <- ev:
			return
		default:
		}
		select {
		case <-ch:
			h.dropped++
		default:
		}
	}
}

// Subscribe returns a channel of events, starting with the latest document if there is one,
// and a cancel func that must be called when the reader leaves.
func (h *Hub) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, subscriberBuffer)
	h.mu.Lock()
	if h.latest != nil {
		ch <- *h.latest
	}
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs, ch)
			h.mu.Unlock()
		})
	}
}

// Latest returns the last published document and its JSON, or nils before the first.
func (h *Hub) Latest() (*statusline.Document, []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.latest == nil {
		return nil, nil
	}
	d := *h.doc
	return &d, h.latest.Data
}

// Stats reports the current subscribers and the events dropped for slow ones so far.
func (h *Hub) Stats() (subscribers int, dropped uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs), h.dropped
}
