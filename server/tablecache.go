package server

import (
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
	}
}

func newTableCache(cat *catalog.Catalog, zxid func() int64) *tableCache {
	c := &tableCache{cat: cat, zxid: zxid}
	c.mu.tables = map[[2]string]catalog.Table{}
	return c
}

// get returns db.name as the local catalog has it now.
func (c *tableCache) get(db, name string) (catalog.Table, error) {
	now := c.zxid()
	key := [2]string{db, name}
	c.mu.Lock()
	if c.mu.at != now {
		clear(c.mu.tables)
		c.mu.at = now
	}
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
	}
	c.mu.Unlock()
	return t, nil
}
