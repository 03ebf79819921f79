package raftmeta

import (
	"fmt"
	"sync"
)

// Watches follow ZooKeeper's WatchManager: two tables, data and child, each
// mapping path -> watcher -> set of modes. getData and exists register a
// standard (one-shot) data watch, getChildren a standard child watch,
// addWatch(PERSISTENT) a persistent watch in both tables and
// addWatch(PERSISTENT_RECURSIVE) a recursive watch in the data table only
// (hence never NodeChildrenChanged). A trigger on a path collects, per table,
// every watcher registered on the path itself (removing their one-shot
// mode) and, when recursive watches exist, every recursive watcher on an
// ancestor; each collected watcher gets one event.

type watchTableID uint8

const (
	tableData watchTableID = iota
	tableChild
)

type watchModes uint8

const (
	modeStandard watchModes = 1 << iota
	modePersistent
	modeRecursive
)

type watchTable struct {
	id        watchTableID
	paths     map[string]map[*Watcher]watchModes
	recursive int // registrations holding modeRecursive
}

// watchReg names one registration of a watcher, so Close can find them all.
type watchReg struct {
	table watchTableID
	path  string
}

func (wt *watchTable) add(path string, w *Watcher, m watchModes) {
	ws := wt.paths[path]
	if ws == nil {
		ws = make(map[*Watcher]watchModes)
		wt.paths[path] = ws
	}
	old := ws[w]
	if old&m == m {
		return
	}
	ws[w] = old | m
	w.regs[watchReg{wt.id, path}] = struct{}{}
	if m&modeRecursive != 0 && old&modeRecursive == 0 {
		wt.recursive++
	}
}

// remove clears modes of w's registration on path; it reports whether any
// of them was set.
func (wt *watchTable) remove(path string, w *Watcher, modes watchModes) bool {
	ws := wt.paths[path]
	old, ok := ws[w]
	if !ok || old&modes == 0 {
		return false
	}
	left := old &^ modes
	if old&modeRecursive != 0 && left&modeRecursive == 0 {
		wt.recursive--
	}
	if left == 0 {
		delete(ws, w)
		delete(w.regs, watchReg{wt.id, path})
		if len(ws) == 0 {
			delete(wt.paths, path)
		}
	} else {
		ws[w] = left
	}
	return true
}

// collect adds to out the watchers a trigger on path notifies, and consumes
// the one-shot registrations it fires.
func (wt *watchTable) collect(path string, out map[*Watcher]struct{}) {
	p := path
	for {
		if ws := wt.paths[p]; ws != nil {
			for w, m := range ws {
				if p == path {
					out[w] = struct{}{}
					if m&modeStandard != 0 {
						wt.remove(p, w, modeStandard)
					}
				} else if m&modeRecursive != 0 {
					out[w] = struct{}{}
				}
			}
		}
		if wt.recursive == 0 || p == "/" {
			return
		}
		p, _ = splitPath(p)
	}
}

// watchManager holds the tables and the live watchers. Lock order: fsm.mu,
// then watchManager.mu, then Watcher.mu.
type watchManager struct {
	mu struct {
		sync.Mutex
		tables   [2]watchTable
		watchers map[*Watcher]struct{}
		closed   bool
	}
}

func newWatchManager() *watchManager {
	wm := &watchManager{}
	for i := range wm.mu.tables {
		wm.mu.tables[i].id = watchTableID(i)
		wm.mu.tables[i].paths = make(map[string]map[*Watcher]watchModes)
	}
	wm.mu.watchers = make(map[*Watcher]struct{})
	return wm
}

// add registers w; it does nothing for a closed watcher.
func (wm *watchManager) add(table watchTableID, path string, w *Watcher, m watchModes) {
	wm.mu.Lock()
	defer wm.mu.Unlock()
	if _, live := wm.mu.watchers[w]; !live {
		return
	}
	wm.mu.tables[table].add(path, w, m)
}

// fire delivers the events of one applied command, in order. Called with
// fsm.mu held; it never blocks (watcher queues are unbounded).
func (wm *watchManager) fire(triggers []trigger, zxid int64) {
	if len(triggers) == 0 {
		return
	}
	wm.mu.Lock()
	defer wm.mu.Unlock()
	for _, tr := range triggers {
		ev := Event{Type: tr.typ, Path: tr.path, Zxid: zxid}
		switch tr.typ {
		case NodeCreated, NodeDataChanged:
			wm.deliverLocked(tableData, tr.path, ev, nil)
		case NodeChildrenChanged:
			wm.deliverLocked(tableChild, tr.path, ev, nil)
		case NodeDeleted:
			// One NodeDeleted per watcher even when it watches both tables.
			done := wm.deliverLocked(tableData, tr.path, ev, nil)
			wm.deliverLocked(tableChild, tr.path, ev, done)
		}
	}
}

func (wm *watchManager) deliverLocked(table watchTableID, path string, ev Event, skip map[*Watcher]struct{}) map[*Watcher]struct{} {
	set := make(map[*Watcher]struct{})
	wm.mu.tables[table].collect(path, set)
	for w := range set {
		if _, ok := skip[w]; ok {
			continue
		}
		w.enqueue(ev)
	}
	return set
}

// removeWatches implements ZooKeeper's removeWatches for one watcher.
// Children and Data remove only the one-shot watch of that kind, Any every
// watch on the path, Persistent and PersistentRecursive only those (the
// semantics of ZooKeeper 3.9).
func (wm *watchManager) removeWatches(path string, w *Watcher, t WatcherType) error {
	return wm.matchWatches(path, w, t, true)
}

// matchWatches finds (and with remove, removes) w's watches of type t on
// path; ErrNoWatcher when none matches.
func (wm *watchManager) matchWatches(path string, w *Watcher, t WatcherType, remove bool) error {
	wm.mu.Lock()
	defer wm.mu.Unlock()
	if !remove {
		var modes [2]watchModes
		for i := range modes {
			modes[i] = wm.mu.tables[i].paths[path][w]
		}
		data, child := modes[tableData], modes[tableChild]
		var found bool
		switch t {
		case WatcherChildren:
			found = child&modeStandard != 0
		case WatcherData:
			found = data&modeStandard != 0
		case WatcherAny:
			found = data|child != 0
		case WatcherPersistent:
			found = (data|child)&modePersistent != 0
		case WatcherPersistentRecursive:
			found = data&modeRecursive != 0
		default:
			return fmt.Errorf("%w: unknown watcher type %d", ErrBadArguments, t)
		}
		if !found {
			return fmt.Errorf("%w: %s (type %d)", ErrNoWatcher, path, t)
		}
		return nil
	}
	data, child := &wm.mu.tables[tableData], &wm.mu.tables[tableChild]
	all := modeStandard | modePersistent | modeRecursive
	var removed bool
	switch t {
	case WatcherChildren:
		removed = child.remove(path, w, modeStandard)
	case WatcherData:
		removed = data.remove(path, w, modeStandard)
	case WatcherAny:
		c := child.remove(path, w, all)
		d := data.remove(path, w, all)
		removed = c || d
	case WatcherPersistent:
		c := child.remove(path, w, modePersistent)
		d := data.remove(path, w, modePersistent)
		removed = c || d
	case WatcherPersistentRecursive:
		removed = data.remove(path, w, modeRecursive)
	default:
		return fmt.Errorf("%w: unknown watcher type %d", ErrBadArguments, t)
	}
	if !removed {
		return fmt.Errorf("%w: %s (type %d)", ErrNoWatcher, path, t)
	}
	return nil
}

func (wm *watchManager) newWatcher(polled bool) *Watcher {
	w := &Watcher{
		wm:     wm,
		polled: polled,
		regs:   make(map[watchReg]struct{}),
		ch:     make(chan Event),
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	wm.mu.Lock()
	closed := wm.mu.closed
	if !closed {
		wm.mu.watchers[w] = struct{}{}
	}
	wm.mu.Unlock()
	if closed {
		// A watcher of a closed node: its channel is closed at once.
		w.once.Do(func() {})
		close(w.done)
		close(w.ch)
		close(w.exited)
		return w
	}
	if polled {
		// No pump: the consumer calls Take; Close closes ch and exited.
		return w
	}
	go w.pump()
	return w
}

// unregister drops w and every registration of it.
func (wm *watchManager) unregister(w *Watcher) {
	wm.mu.Lock()
	defer wm.mu.Unlock()
	delete(wm.mu.watchers, w)
	for r := range w.regs {
		wt := &wm.mu.tables[r.table]
		wt.remove(r.path, w, wt.paths[r.path][w])
	}
}

// closeAll closes every watcher and refuses new ones.
func (wm *watchManager) closeAll() {
	wm.mu.Lock()
	wm.mu.closed = true
	ws := make([]*Watcher, 0, len(wm.mu.watchers))
	for w := range wm.mu.watchers {
		ws = append(ws, w)
	}
	wm.mu.Unlock()
	for _, w := range ws {
		w.Close()
	}
}

// Watcher receives watch events: one per consumer (a ZooKeeper connection,
// the replica manager). Events arrive on Events in apply order; the queue
// behind it is unbounded so the FSM never waits for a slow consumer. A
// Watcher is safe for concurrent use.
type Watcher struct {
	wm     *watchManager
	polled bool                  // NewPolledWatcher: Take instead of Events
	regs   map[watchReg]struct{} // guarded by wm.mu
	ch     chan Event
	notify chan struct{} // capacity 1: "the queue may be non-empty"
	done   chan struct{} // closed by Close
	exited chan struct{} // closed when pump returns
	once   sync.Once

	mu struct {
		sync.Mutex
		queue  []Event
		closed bool
	}
}

// Ready returns a channel that receives a value (capacity 1, coalesced)
// after events are queued; for a polled watcher (NewPolledWatcher) only.
// A receive means "call Take"; Take may then return nothing.
func (w *Watcher) Ready() <-chan struct{} { return w.notify }

// Take removes and returns every queued event, in apply order; for a polled
// watcher only (it returns nil for a pumped one). Because events are queued
// while the FSM applies the change, under the lock reads take, Take after a
// read returns every event of every change that read observed: a consumer
// that calls Take before sending a read's reply delivers events before the
// data that triggered them. It does not block.
func (w *Watcher) Take() []Event {
	if !w.polled {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.mu.queue
	w.mu.queue = nil
	return q
}

// Events returns the channel events arrive on. It is closed after Close (or
// after the Node is closed); undelivered events are dropped then.
func (w *Watcher) Events() <-chan Event { return w.ch }

// Close removes all of the watcher's registrations, stops delivery and
// closes the Events channel. It waits for the delivery goroutine to exit.
// Calling it again does nothing.
func (w *Watcher) Close() {
	w.once.Do(func() {
		w.wm.unregister(w)
		w.mu.Lock()
		w.mu.closed = true
		w.mu.queue = nil
		w.mu.Unlock()
		close(w.done)
		if w.polled {
			close(w.ch)
			close(w.exited)
		}
	})
	<-w.exited
}

func (w *Watcher) enqueue(ev Event) {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return
	}
	w.mu.queue = append(w.mu.queue, ev)
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// pump moves queued events to the channel until Close.
func (w *Watcher) pump() {
	defer close(w.exited)
	defer close(w.ch)
	for {
		w.mu.Lock()
		if len(w.mu.queue) == 0 {
			w.mu.Unlock()
			select {
			case <-w.notify:
				continue
			case <-w.done:
				return
			}
		}
		ev := w.mu.queue[0]
		w.mu.Unlock()
		select {
		case w.ch <- ev:
			w.mu.Lock()
			if len(w.mu.queue) > 0 {
				w.mu.queue[0] = Event{}
				w.mu.queue = w.mu.queue[1:]
			}
			w.mu.Unlock()
		case <-w.done:
			return
		}
	}
}
