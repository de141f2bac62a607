package waitroom

import (
	"slices"
	"sync"
	"time"
)

// Known is a room the instance knows to exist: what Config.Known lists for
// the Scheduler to tick and the Collector to report.
type Known struct {
	// ID is the promotion's id.
	ID string
	// Starts is when the room's admission opens (the promotion's
	// starts_at); the scheduler leaves the room alone before it, by its
	// own clock. Zero if unknown: ticked from the first round.
	Starts time.Time
	// Ends is when the promotion ends by the definition the instance
	// holds: its ends_at, or when it was closed. Once a tick of the room
	// saw its promotion ended, the scheduler ticks it again only when its
	// entry changes (a later end, say) or while Ends is still ahead by
	// its clock. Zero if unknown.
	Ends time.Time

	// rev is Rooms.Open's count for the rooms opened through Rooms: a
	// room opened again is a changed entry.
	rev uint64
}

// same reports whether k and o are the same entry.
func (k Known) same(o Known) bool {
	return k.ID == o.ID && k.rev == o.rev && k.Starts.Equal(o.Starts) && k.Ends.Equal(o.Ends)
}

// opened is the set of rooms opened through one Rooms value, the default
// of Config.Known.
type opened struct {
	mu    sync.Mutex
	rooms map[string]uint64 // id → its Open count
}

func (o *opened) add(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rooms == nil {
		o.rooms = make(map[string]uint64)
	}
	o.rooms[id]++
}

func (o *opened) remove(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.rooms, id)
}

func (o *opened) list() []Known {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]Known, 0, len(o.rooms))
	for id, rev := range o.rooms {
		out = append(out, Known{ID: id, rev: rev})
	}
	return out
}

// Opened lists the rooms opened through r (Open) and not unregistered
// since (Unregister), with no start or end known: the default of
// Config.Known, for a program that opens its rooms itself. No I/O.
func (r *Rooms) Opened() []Known { return r.opened.list() }

// known lists the rooms of Config.Known, sorted by id (so the same rooms
// come first in every round and scrape), without duplicates.
func (r *Rooms) known() []Known {
	var list []Known
	if r.cfg.Known != nil {
		list = slices.Clone(r.cfg.Known())
	} else {
		list = r.opened.list()
	}
	slices.SortFunc(list, func(a, b Known) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return slices.CompactFunc(list, func(a, b Known) bool { return a.ID == b.ID })
}
