package server

import (
	"fmt"
	"sync"

	"strom/raftmeta/catalog"
)

// tableCache keeps decoded tables for the data path. An entry is good while
// the metadata tree has applied nothing since it was read (metadata changes
// are rare; data calls are not).
type tableCache struct {
	cat  *catalog.Catalog
	zxid func() int64

	mu struct {
		sync.Mutex
		at     int64 // zxid the entries were read at
		tables map[[2]string]catalog.Table
		// ids maps table ids to paths, for lookups by id (the Fluss
		// protocol's); scanned is true once every table was listed at at.
		ids     map[int64][2]string
		scanned bool
	}
}

func newTableCache(cat *catalog.Catalog, zxid func() int64) *tableCache {
	c := &tableCache{cat: cat, zxid: zxid}
	c.mu.tables = map[[2]string]catalog.Table{}
	c.mu.ids = map[int64][2]string{}
	return c
}

// refreshLocked drops the entries when the metadata has moved on to now.
func (c *tableCache) refreshLocked(now int64) {
	if c.mu.at != now {
		clear(c.mu.tables)
		clear(c.mu.ids)
		c.mu.scanned = false
		c.mu.at = now
	}
}

// get returns db.name as the local catalog has it now.
func (c *tableCache) get(db, name string) (catalog.Table, error) {
	now := c.zxid()
	key := [2]string{db, name}
	c.mu.Lock()
	c.refreshLocked(now)
	t, ok := c.mu.tables[key]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := c.cat.Table(db, name)
	if err != nil {
		return t, err
	}
	c.mu.Lock()
	if c.mu.at == now {
		c.mu.tables[key] = t
		c.mu.ids[t.Registration.TableID] = key
	}
	c.mu.Unlock()
	return t, nil
}

// getByID returns the table with id as the local catalog has it now; an
// error wrapping catalog.ErrTableNotExist when there is none. An id not seen
// yet lists every table, at most once per metadata change, so unknown ids
// cost a map lookup.
func (c *tableCache) getByID(id int64) (catalog.Table, error) {
	now := c.zxid()
	c.mu.Lock()
	c.refreshLocked(now)
	key, ok := c.mu.ids[id]
	scanned := c.mu.scanned
	c.mu.Unlock()
	if !ok && !scanned {
		tables, err := c.cat.AllTables()
		if err != nil {
			return catalog.Table{}, err
		}
		c.mu.Lock()
		if c.mu.at == now {
			for _, t := range tables {
				c.mu.ids[t.Registration.TableID] = [2]string{t.Database, t.Name}
			}
			c.mu.scanned = true
		}
		key, ok = c.mu.ids[id]
		c.mu.Unlock()
	}
	if !ok {
		return catalog.Table{}, fmt.Errorf("%w: no table has id %d", catalog.ErrTableNotExist, id)
	}
	t, err := c.get(key[0], key[1])
	if err == nil && t.Registration.TableID != id {
		// Dropped and created again under the same name since the ids
		// were read.
		err = fmt.Errorf("%w: no table has id %d", catalog.ErrTableNotExist, id)
	}
	return t, err
}
