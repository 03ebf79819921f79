import java.time.Duration;
import java.util.Arrays;
import java.util.Map;

import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.client.admin.OffsetSpec;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.ScanRecord;
import org.apache.fluss.client.table.scanner.log.LogScanner;
import org.apache.fluss.client.table.scanner.log.ScanRecords;
import org.apache.fluss.client.table.writer.AppendWriter;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.metadata.Schema;
import org.apache.fluss.metadata.TableDescriptor;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.row.BinaryString;
import org.apache.fluss.row.GenericRow;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.types.DataTypes;

/**
 * The real Fluss 0.9.1 Java client's log path against a Strom node's fluss.listen: it creates a
 * log table of 2 buckets, appends 1000 rows (the idempotent writer: INIT_WRITER, PRODUCE_LOG of
 * V0 batches), scans them back with every column and projected to two (FETCH_LOG, the client's
 * CRC check on the full scan), and lists the earliest and latest offsets (LIST_OFFSETS); then
 * scans a table whose rows are all in one of its two buckets (an empty bucket in every answer). It
 * prints what it checked and PASS last (check.sh reads it); any mismatch throws.
 */
public class FlussLogCheck {
    static final int ROWS = 1000;

    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("bootstrap.servers", args[0]);
        TablePath path = TablePath.of("fluss", "log_check");
        try (Connection c = ConnectionFactory.createConnection(conf); Admin admin = c.getAdmin()) {
            Schema schema = Schema.newBuilder()
                    .column("id", DataTypes.INT())
                    .column("name", DataTypes.STRING())
                    .column("score", DataTypes.BIGINT())
                    .build();
            admin.dropTable(path, true).get(); // a run that failed half-way
            admin.createTable(path, TableDescriptor.builder().schema(schema).distributedBy(2).build(), false).get();
            try (Table table = c.getTable(path)) {
                AppendWriter w = table.newAppend().createWriter();
                for (int i = 0; i < ROWS; i++) {
                    w.append(GenericRow.of(i, BinaryString.fromString("name-" + i), (long) i * 10));
                }
                w.flush();
                System.out.println("appended: " + ROWS);

                long[] all = scan(table, null);
                check(all[0] == ROWS && all[1] == (long) ROWS * (ROWS - 1) / 2 && all[2] == 10 * all[1],
                        "scan all columns: rows, sum(id), sum(score) = " + Arrays.toString(all));
                System.out.println("scanned all columns: " + all[0] + " rows, names and scores match the ids");
                long[] projected = scan(table, new int[] {0, 2});
                check(projected[0] == ROWS && projected[1] == all[1] && projected[2] == all[2],
                        "scan projected to (id, score): " + Arrays.toString(projected));
                System.out.println("scanned projected (id, score): " + projected[0] + " rows");
            }
            Map<Integer, Long> latest = admin.listOffsets(path, Arrays.asList(0, 1), new OffsetSpec.LatestSpec()).all().get();
            Map<Integer, Long> earliest = admin.listOffsets(path, Arrays.asList(0, 1), new OffsetSpec.EarliestSpec()).all().get();
            check(latest.get(0) + latest.get(1) == ROWS && earliest.get(0) == 0 && earliest.get(1) == 0,
                    "offsets: latest " + latest + ", earliest " + earliest);
            System.out.println("offsets: latest " + latest + " (sum " + ROWS + "), earliest " + earliest);
            admin.dropTable(path, false).get();
            oneBucketFull(c, admin);
        }
        System.out.println("PASS");
    }

    /**
     * All rows in bucket 1 of two (bucket key k = 3 hashes there), scanned from the beginning of
     * both: every fetch answers the empty bucket 0 first, which the client must be able to read
     * (a bucket answered without its records field made 0.9.1 drop the rest of the answer,
     * unseen, so this scan saw no rows at all).
     */
    static void oneBucketFull(Connection c, Admin admin) throws Exception {
        TablePath path = TablePath.of("fluss", "log_check_one_bucket");
        Schema schema = Schema.newBuilder().column("k", DataTypes.INT()).column("v", DataTypes.INT()).build();
        admin.dropTable(path, true).get();
        admin.createTable(path, TableDescriptor.builder().schema(schema).distributedBy(2, "k").build(), false).get();
        final int rows = 100;
        long n = 0, sum = 0;
        try (Table table = c.getTable(path)) {
            AppendWriter w = table.newAppend().createWriter();
            for (int i = 0; i < rows; i++) {
                w.append(GenericRow.of(3, i));
            }
            w.flush();
            try (LogScanner s = table.newScan().createLogScanner()) {
                s.subscribeFromBeginning(0);
                s.subscribeFromBeginning(1);
                long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
                while (n < rows && System.nanoTime() < deadline) {
                    for (ScanRecord r : s.poll(Duration.ofSeconds(1))) {
                        n++;
                        sum += r.getRow().getInt(1);
                    }
                }
            }
            check(n == rows && sum == (long) rows * (rows - 1) / 2, "one bucket full, one empty: rows " + n + ", sum(v) " + sum);
        }
        Map<Integer, Long> latest = admin.listOffsets(path, Arrays.asList(0, 1), new OffsetSpec.LatestSpec()).all().get();
        check(latest.get(0) == 0 && latest.get(1) == rows, "k = 3 all in bucket 1: latest " + latest);
        System.out.println("scanned a table with one bucket empty: " + n + " rows, latest " + latest);
        admin.dropTable(path, false).get();
    }

    /** Scans every bucket from the beginning until ROWS rows: {rows, sum(id), sum(score)}. */
    static long[] scan(Table table, int[] projection) throws Exception {
        long[] out = new long[3];
        try (LogScanner s = (projection == null ? table.newScan() : table.newScan().project(projection)).createLogScanner()) {
            s.subscribeFromBeginning(0);
            s.subscribeFromBeginning(1);
            // poll may return early and empty (a fetch answered with an
            // error, metadata being refreshed): keep polling, up to a minute.
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (out[0] < ROWS && System.nanoTime() < deadline) {
                ScanRecords recs = s.poll(Duration.ofSeconds(1));
                for (ScanRecord r : recs) {
                    InternalRow row = r.getRow();
                    int id = row.getInt(0);
                    long score;
                    if (projection == null) {
                        check(row.getString(1).toString().equals("name-" + id), "row " + id + ": name " + row.getString(1));
                        score = row.getLong(2);
                    } else {
                        check(row.getFieldCount() == 2, "projected row has " + row.getFieldCount() + " fields");
                        score = row.getLong(1);
                    }
                    check(score == (long) id * 10, "row " + id + ": score " + score);
                    out[0]++;
                    out[1] += id;
                    out[2] += score;
                }
            }
        }
        return out;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }
}
