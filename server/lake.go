package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"strom/fluss/paimon"
	"strom/raftmeta/catalog"
	"strom/record"
)

// lakeTable applies to a new table what Fluss 0.9.1's coordinator does for
// the lake (CoordinatorService.createTable and applySystemDefaults) before
// the table is registered: with datalake.format set, a table that names no
// table.datalake.format gets the cluster's; a table with
// table.datalake.enabled = true is refused without datalake.format, and
// otherwise gets its Paimon table created in datalake.paimon.warehouse
// (fluss/paimon, as PaimonLakeCatalog.createTable), unless the table exists
// already and ignoreIfExists holds. It runs on the coordinator's node (the
// Connect API's CreateTable is forwarded there), whose datalake.* keys
// count. A descriptor the coordinator would refuse anyway is returned
// as it is, for the coordinator to report.
func (s *Server) lakeTable(ctx context.Context, db, name string, desc record.TableDescriptor, ignoreIfExists bool) (record.TableDescriptor, error) {
	format := s.cfg.DatalakeFormat
	if format != "" {
		if _, ok := desc.Properties[record.OptDatalakeFormat]; !ok {
			props := maps.Clone(desc.Properties)
			if props == nil {
				props = map[string]string{}
			}
			props[record.OptDatalakeFormat] = format
			desc.Properties = props
		}
	}
	if !strings.EqualFold(desc.Properties[record.OptDatalakeEnabled], "true") {
		return desc, nil
	}
	if format == "" {
		return desc, &record.InvalidError{Field: "datalake.format", Reason: fmt.Sprintf(
			"'%s' is enabled for the table, but the cluster doesn't enable datalake tables (set datalake.format, datalake.paimon.warehouse on the nodes)", record.OptDatalakeEnabled)}
	}
	if f := desc.Properties[record.OptDatalakeFormat]; !strings.EqualFold(f, format) {
		return desc, &record.InvalidError{Field: "properties." + record.OptDatalakeFormat, Reason: fmt.Sprintf(
			"the table's lake format %q is not the cluster's datalake.format %q", f, format)}
	}
	norm, err := desc.Normalize(s.cfg.DefaultBucketNumber)
	if err != nil || norm.IsPartitioned() {
		return desc, nil
	}
	if ignoreIfExists {
		if err := s.meta.Sync(ctx); err != nil {
			return desc, err
		}
		if _, err := s.cat.Table(db, name); err == nil {
			return desc, nil
		} else if !errors.Is(err, catalog.ErrTableNotExist) && !errors.Is(err, catalog.ErrDatabaseNotExist) {
			return desc, err
		}
	}
	schema, err := paimon.TableSchema(norm, time.Now())
	if err != nil {
		return desc, &record.InvalidError{Field: "schema", Reason: err.Error()}
	}
	w, err := paimon.OpenWarehouse(s.cfg.DatalakePaimonWarehouse)
	if err != nil {
		return desc, err
	}
	if err := w.CreateTable(db, name, schema); err != nil {
		return desc, err
	}
	s.lg.Info("created the lake table", "table", db+"."+name, "format", format, "dir", w.TableDir(db, name))
	return desc, nil
}

// kvFormatDefault gives a new primary-key table that names no
// table.kv.format-version the current one (2), as Fluss 0.9.1's
// coordinator does (applySystemDefaults). It matters for lake tables: with
// version 2 and a bucket key of its own a table of table.datalake.format
// paimon has compacted primary keys (which prefix lookups need) and
// Paimon-hashed buckets; without it the 0.9.1 client takes the legacy
// version 1 and encodes its primary keys as Paimon keys
// (record.PrimaryKeyEncoder). Any other table's keys are the same in both.
func kvFormatDefault(desc record.TableDescriptor) record.TableDescriptor {
	if !desc.HasPrimaryKey() {
		return desc
	}
	if _, ok := desc.Properties[record.OptKvFormatVersion]; ok {
		return desc
	}
	props := maps.Clone(desc.Properties)
	if props == nil {
		props = map[string]string{}
	}
	props[record.OptKvFormatVersion] = strconv.Itoa(record.CurrentKvFormatVersion)
	desc.Properties = props
	return desc
}

// lakeTableOptions are the lake catalog options a Fluss client sees in a
// lake table's properties (Fluss's LakeStorageUtils.
// generateDefaultTableLakeOptions: each datalake.FORMAT.KEY set on the node
// as table.datalake.FORMAT.KEY), from which Flink's $lake and union reads
// open the Paimon catalog; nil without datalake.format.
func (s *Server) lakeTableOptions() map[string]string {
	if s.cfg.DatalakeFormat == "" {
		return nil
	}
	out := map[string]string{}
	if v := s.cfg.DatalakePaimonMetastore; v != "" {
		out["table.datalake.paimon.metastore"] = v
	}
	if v := s.cfg.DatalakePaimonWarehouse; v != "" {
		out["table.datalake.paimon.warehouse"] = v
	}
	return out
}
