import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.client.lookup.LookupResult;
import org.apache.fluss.client.lookup.Lookuper;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.batch.BatchScanner;
import org.apache.fluss.client.table.writer.AppendWriter;
import org.apache.fluss.client.table.writer.UpsertWriter;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.metadata.Schema;
import org.apache.fluss.metadata.TableBucket;
import org.apache.fluss.metadata.TableDescriptor;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.row.BinaryString;
import org.apache.fluss.row.GenericRow;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.types.DataTypes;
import org.apache.fluss.utils.CloseableIterator;

/**
 * The real Fluss 0.9.1 Java client's primary-key path against a Strom node's fluss.listen: a
 * primary-key table of 3 buckets gets 1000 upserts (the idempotent writer: PUT_KV of KV
 * batches), a partial update of one column on every 10th key, and deletes of every 7th; every
 * key is looked up (LOOKUP) and its row compared, 10 absent keys answer nothing; a table whose
 * bucket key (tenant) prefixes its primary key (tenant, id) answers a lookup by tenant with each
 * tenant's rows (PREFIX_LOOKUP); LIMIT_SCAN reads the primary-key table's buckets (every row, and
 * a limit of 5) and a log table's last 10 records. It prints what it checked and PASS last
 * (check.sh reads it); any mismatch throws.
 */
public class FlussKvCheck {
    static final int ROWS = 1000;

    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("bootstrap.servers", args[0]);
        TablePath users = TablePath.of("fluss", "kv_check_users");
        TablePath orders = TablePath.of("fluss", "kv_check_orders");
        TablePath events = TablePath.of("fluss", "kv_check_events");
        try (Connection c = ConnectionFactory.createConnection(conf); Admin admin = c.getAdmin()) {
            for (TablePath p : new TablePath[] {users, orders, events}) {
                admin.dropTable(p, true).get(); // a run that failed half-way
            }
            admin.createTable(users, TableDescriptor.builder()
                    .schema(Schema.newBuilder()
                            .column("id", DataTypes.INT())
                            .column("name", DataTypes.STRING())
                            .column("score", DataTypes.BIGINT())
                            .primaryKey("id")
                            .build())
                    .distributedBy(3)
                    .build(), false).get();
            admin.createTable(orders, TableDescriptor.builder()
                    .schema(Schema.newBuilder()
                            .column("tenant", DataTypes.INT())
                            .column("id", DataTypes.BIGINT())
                            .column("v", DataTypes.STRING())
                            .primaryKey("tenant", "id")
                            .build())
                    .distributedBy(3, "tenant")
                    .build(), false).get();
            admin.createTable(events, TableDescriptor.builder()
                    .schema(Schema.newBuilder()
                            .column("id", DataTypes.INT())
                            .column("name", DataTypes.STRING())
                            .build())
                    .distributedBy(1)
                    .build(), false).get();

            Map<Integer, Object[]> want = new HashMap<>();
            try (Table table = c.getTable(users)) {
                UpsertWriter w = table.newUpsert().createWriter();
                for (int i = 0; i < ROWS; i++) {
                    w.upsert(GenericRow.of(i, BinaryString.fromString("name-" + i), (long) i * 10));
                    want.put(i, new Object[] {"name-" + i, (long) i * 10});
                }
                w.flush();
                System.out.println("upserted: " + ROWS);

                UpsertWriter partial = table.newUpsert().partialUpdate("id", "score").createWriter();
                int updated = 0;
                for (int i = 0; i < ROWS; i += 10) {
                    partial.upsert(GenericRow.of(i, null, (long) -i));
                    want.get(i)[1] = (long) -i;
                    updated++;
                }
                partial.flush();
                System.out.println("partially updated (score only): " + updated);

                int deleted = 0;
                for (int i = 3; i < ROWS; i += 7) {
                    w.delete(GenericRow.of(i, null, null));
                    want.remove(i);
                    deleted++;
                }
                w.flush();
                System.out.println("deleted: " + deleted);

                Lookuper l = table.newLookup().createLookuper();
                List<CompletableFuture<LookupResult>> results = new ArrayList<>();
                for (int i = 0; i < ROWS + 10; i++) {
                    results.add(l.lookup(GenericRow.of(i)));
                }
                int present = 0;
                int absent = 0;
                for (int i = 0; i < ROWS + 10; i++) {
                    InternalRow row = results.get(i).get().getSingletonRow();
                    Object[] w0 = want.get(i);
                    if (w0 == null) {
                        check(row == null, "key " + i + " was deleted or never written, lookup found a row");
                        absent++;
                        continue;
                    }
                    check(row != null, "key " + i + ": lookup found nothing");
                    check(row.getInt(0) == i && row.getString(1).toString().equals(w0[0]) && row.getLong(2) == (long) w0[1],
                            "key " + i + ": (" + row.getInt(0) + ", " + row.getString(1) + ", " + row.getLong(2) + "), want (" + i + ", " + w0[0] + ", " + w0[1] + ")");
                    present++;
                }
                System.out.println("looked up: " + present + " rows as written, " + absent + " absent keys answered none");

                long tableId = table.getTableInfo().getTableId();
                int scanned = 0;
                for (int b = 0; b < 3; b++) {
                    for (InternalRow row : limitScan(table, new TableBucket(tableId, b), 10 * ROWS)) {
                        Object[] w0 = want.get(row.getInt(0));
                        check(w0 != null && row.getString(1).toString().equals(w0[0]) && row.getLong(2) == (long) w0[1],
                                "limit scan: row " + row.getInt(0) + " (" + row.getString(1) + ", " + row.getLong(2) + ") is not as written");
                        scanned++;
                    }
                }
                check(scanned == want.size(), "limit scan of every bucket saw " + scanned + " rows, want " + want.size());
                int five = limitScan(table, new TableBucket(tableId, 0), 5).size();
                check(five == 5, "limit scan with limit 5 answered " + five + " rows");
                System.out.println("limit scan (primary key): " + scanned + " rows in 3 buckets, each as written; limit 5 gave 5");
            }

            try (Table table = c.getTable(orders)) {
                UpsertWriter w = table.newUpsert().createWriter();
                for (int tenant = 0; tenant < 5; tenant++) {
                    for (long id = 0; id < tenant * 4; id++) { // tenant 0 has none
                        w.upsert(GenericRow.of(tenant, id, BinaryString.fromString(tenant + "/" + id)));
                    }
                }
                w.flush();
                Lookuper l = table.newLookup().lookupBy("tenant").createLookuper();
                int rows = 0;
                for (int tenant = 0; tenant < 5; tenant++) {
                    List<InternalRow> got = l.lookup(GenericRow.of(tenant)).get().getRowList();
                    check(got.size() == tenant * 4, "prefix lookup of tenant " + tenant + ": " + got.size() + " rows, want " + tenant * 4);
                    boolean[] ids = new boolean[tenant * 4];
                    for (InternalRow r : got) {
                        long id = r.getLong(1);
                        check(r.getInt(0) == tenant && id >= 0 && id < ids.length && !ids[(int) id]
                                        && r.getString(2).toString().equals(tenant + "/" + id),
                                "prefix lookup of tenant " + tenant + ": row (" + r.getInt(0) + ", " + id + ", " + r.getString(2) + ")");
                        ids[(int) id] = true;
                        rows++;
                    }
                }
                System.out.println("prefix lookup by tenant: " + rows + " rows of 5 tenants, each as written");
            }

            try (Table table = c.getTable(events)) {
                AppendWriter w = table.newAppend().createWriter();
                for (int i = 0; i < 100; i++) {
                    w.append(GenericRow.of(i, BinaryString.fromString("e-" + i)));
                }
                w.flush();
                List<InternalRow> got = limitScan(table, new TableBucket(table.getTableInfo().getTableId(), 0), 10);
                check(got.size() == 10, "limit scan of the log table: " + got.size() + " rows, want 10");
                for (int i = 0; i < 10; i++) {
                    InternalRow r = got.get(i);
                    check(r.getInt(0) == 90 + i && r.getString(1).toString().equals("e-" + (90 + i)),
                            "limit scan of the log table: row " + i + " is (" + r.getInt(0) + ", " + r.getString(1) + "), want " + (90 + i));
                }
                System.out.println("limit scan (log): the last 10 of 100 records, in order");
            }

            for (TablePath p : new TablePath[] {users, orders, events}) {
                admin.dropTable(p, false).get();
            }
        }
        System.out.println("PASS");
    }

    /** The rows one LIMIT_SCAN of a bucket answers, copied out of the client's buffers. */
    static List<InternalRow> limitScan(Table table, TableBucket bucket, int limit) throws Exception {
        List<InternalRow> out = new ArrayList<>();
        int fields = table.getTableInfo().getRowType().getFieldCount();
        try (BatchScanner s = table.newScan().limit(limit).createBatchScanner(bucket)) {
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (System.nanoTime() < deadline) {
                CloseableIterator<InternalRow> it = s.pollBatch(Duration.ofSeconds(1));
                if (it == null) {
                    return out; // the answer was read
                }
                while (it.hasNext()) {
                    InternalRow r = it.next();
                    GenericRow copy = new GenericRow(fields);
                    for (int i = 0; i < fields; i++) {
                        copy.setField(i, InternalRow.createFieldGetter(table.getTableInfo().getRowType().getTypeAt(i), i).getFieldOrNull(r));
                    }
                    out.add(copy);
                }
                it.close();
            }
        }
        throw new AssertionError("limit scan of " + bucket + ": no answer in 60 s");
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }
}
