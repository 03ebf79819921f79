// FlussCheck: the functional check of scripts/fluss.sh, run with the real Apache Fluss Java client
// (fluss-client) against a real CoordinatorServer and TabletServer whose ZooKeeper is either a
// Strom node's shim or a real ZooKeeper.
//
//   java -cp 'classes:fluss-client.jar:log4j...' FlussCheck BOOTSTRAP_HOST:PORT
//
// Steps, in order (each prints "ok <step>: <detail>" to stdout): list databases and servers;
// create a database; create a log table (id INT, name STRING, v BIGINT; 2 buckets, ZSTD), append
// ROWS rows, list the earliest and latest offsets (0 and sums to ROWS), read every row back with
// all columns and compare each value, read the column v alone (projection pushed to the server)
// and compare it; create a primary-key table (same columns, PK id), upsert ROWS rows and then an
// update of every tenth, look every key up and compare, look up a key never written (absent);
// drop both tables and the database. The last line is "PASS" or "FAIL <step>: <root cause>", and
// the exit code is 0 or 1. Env: ROWS (1000), DB (database name, default check_<unix time>).
//
// Compiled by fluss.sh with javac against fluss-client only (a shaded jar: no other deps).

import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.client.admin.OffsetSpec;
import org.apache.fluss.client.lookup.Lookuper;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.ScanRecord;
import org.apache.fluss.client.table.scanner.log.LogScanner;
import org.apache.fluss.client.table.writer.AppendWriter;
import org.apache.fluss.client.table.writer.UpsertWriter;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.metadata.DatabaseDescriptor;
import org.apache.fluss.metadata.Schema;
import org.apache.fluss.metadata.TableDescriptor;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.row.BinaryString;
import org.apache.fluss.row.GenericRow;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.types.DataTypes;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

public final class FlussCheck {
    /** How long any one client call may take; the servers answer in milliseconds when healthy. */
    private static final long CALL_TIMEOUT_S = 120;
    /** How long a scan may take to read every row back. */
    private static final long SCAN_TIMEOUT_S = 60;
    private static final List<Integer> BUCKETS = Arrays.asList(0, 1);

    private static String step = "connect";

    public static void main(String[] args) {
        if (args.length != 1) {
            System.err.println("usage: FlussCheck BOOTSTRAP_HOST:PORT");
            System.exit(2);
        }
        int rows = Integer.parseInt(env("ROWS", "1000"));
        String db = env("DB", "check_" + System.currentTimeMillis() / 1000);
        Configuration conf = new Configuration();
        conf.setString("bootstrap.servers", args[0]);
        conf.setString("client.writer.acks", "all");
        conf.setString("client.scanner.log.fetch.wait-max-time", "0ms"); // read to the end, no long polls
        int rc = 0;
        try (Connection conn = ConnectionFactory.createConnection(conf); Admin admin = conn.getAdmin()) {
            run(conn, admin, db, rows);
            System.out.println("PASS");
        } catch (Throwable e) {
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) root = root.getCause();
            System.err.println("[FlussCheck] step " + step + " failed:");
            e.printStackTrace();
            System.out.println("FAIL " + step + ": " + root.getClass().getSimpleName() + ": " + root.getMessage());
            rc = 1;
        }
        System.out.flush();
        System.exit(rc); // the client's non-daemon threads may linger after close
    }

    static void run(Connection conn, Admin admin, String db, int rows) throws Exception {
        TablePath logPath = TablePath.of(db, "log1");
        TablePath kvPath = TablePath.of(db, "kv1");

        begin("list_databases");
        ok(get(admin.listDatabases()).toString());
        begin("server_nodes");
        int servers = get(admin.getServerNodes()).size();
        if (servers < 2) throw new IllegalStateException(servers + " server nodes, want a coordinator and a tablet server");
        ok(servers + " nodes");

        begin("create_database");
        get(admin.createDatabase(db, DatabaseDescriptor.EMPTY, false));
        check(get(admin.databaseExists(db)), "database " + db + " not found after create");
        ok(db);

        begin("create_log_table");
        get(admin.createTable(logPath, TableDescriptor.builder().schema(columns().build()).distributedBy(BUCKETS.size())
                .property("table.log.arrow.compression.type", "ZSTD").build(), false));
        ok("table id " + get(admin.getTableInfo(logPath)).getTableId());

        try (Table t = conn.getTable(logPath)) {
            begin("append");
            AppendWriter w = t.newAppend().createWriter();
            List<CompletableFuture<?>> fs = new ArrayList<>();
            for (int i = 0; i < rows; i++) fs.add(w.append(GenericRow.of(i, BinaryString.fromString("row-" + i), (long) i * 7)));
            w.flush();
            get(CompletableFuture.allOf(fs.toArray(new CompletableFuture[0])));
            ok(rows + " rows");

            begin("list_offsets");
            Map<Integer, Long> earliest = get(admin.listOffsets(logPath, BUCKETS, new OffsetSpec.EarliestSpec()).all());
            Map<Integer, Long> latest = get(admin.listOffsets(logPath, BUCKETS, new OffsetSpec.LatestSpec()).all());
            long sum = latest.values().stream().mapToLong(Long::longValue).sum();
            check(earliest.values().stream().allMatch(o -> o == 0), "earliest offsets " + earliest + ", want 0");
            check(sum == rows, "latest offsets " + latest + " sum to " + sum + ", want " + rows);
            ok("earliest " + earliest + ", latest " + latest);

            begin("scan_all_columns");
            BitSet seen = new BitSet(rows);
            scan(t.newScan().createLogScanner(), rows, row -> {
                int id = row.getInt(0);
                check(row.getFieldCount() == 3, "row has " + row.getFieldCount() + " fields, want 3");
                check(row.getString(1).toString().equals("row-" + id) && row.getLong(2) == (long) id * 7,
                        "row " + id + " read back as (" + row.getString(1) + ", " + row.getLong(2) + ")");
                check(id >= 0 && id < rows && !seen.get(id), "row id " + id + " unexpected or read twice");
                seen.set(id);
            });
            ok(rows + " rows, every value compared");

            begin("scan_projected");
            BitSet seenV = new BitSet(rows);
            scan(t.newScan().project(Arrays.asList("v")).createLogScanner(), rows, row -> {
                check(row.getFieldCount() == 1, "projected row has " + row.getFieldCount() + " fields, want 1");
                long v = row.getLong(0);
                check(v % 7 == 0 && v >= 0 && v / 7 < rows && !seenV.get((int) (v / 7)), "projected v " + v + " unexpected or read twice");
                seenV.set((int) (v / 7));
            });
            ok(rows + " rows of column v");
        }

        begin("create_pk_table");
        get(admin.createTable(kvPath, TableDescriptor.builder().schema(columns().primaryKey("id").build())
                .distributedBy(BUCKETS.size(), "id").build(), false));
        ok("table id " + get(admin.getTableInfo(kvPath)).getTableId());

        try (Table t = conn.getTable(kvPath)) {
            begin("upsert");
            UpsertWriter w = t.newUpsert().createWriter();
            List<CompletableFuture<?>> fs = new ArrayList<>();
            for (int i = 0; i < rows; i++) fs.add(w.upsert(GenericRow.of(i, BinaryString.fromString("k-" + i), (long) i)));
            for (int i = 0; i < rows; i += 10) fs.add(w.upsert(GenericRow.of(i, BinaryString.fromString("u-" + i), (long) -i)));
            w.flush();
            get(CompletableFuture.allOf(fs.toArray(new CompletableFuture[0])));
            ok(rows + " rows, then " + (rows + 9) / 10 + " updates");

            begin("lookup");
            Lookuper lk = t.newLookup().createLookuper();
            List<CompletableFuture<org.apache.fluss.client.lookup.LookupResult>> ls = new ArrayList<>();
            for (int i = 0; i < rows; i++) ls.add(lk.lookup(GenericRow.of(i)));
            for (int i = 0; i < rows; i++) {
                InternalRow r = get(ls.get(i)).getSingletonRow();
                boolean upd = i % 10 == 0;
                check(r != null, "key " + i + " not found");
                check(r.getString(1).toString().equals((upd ? "u-" : "k-") + i) && r.getLong(2) == (upd ? -i : i),
                        "key " + i + " looked up as (" + r.getString(1) + ", " + r.getLong(2) + ")");
            }
            InternalRow none = get(lk.lookup(GenericRow.of(rows + 12345))).getSingletonRow();
            check(none == null, "a key never written was found: " + none);
            ok(rows + " keys, updates seen, an absent key absent");
        }

        begin("drop");
        get(admin.dropTable(logPath, false));
        get(admin.dropTable(kvPath, false));
        get(admin.dropDatabase(db, false, true));
        check(!get(admin.databaseExists(db)), "database " + db + " still there after drop");
        ok("tables and database " + db);
    }

    /** The columns of both tables: id INT, name STRING, v BIGINT. */
    static Schema.Builder columns() {
        return Schema.newBuilder()
                .column("id", DataTypes.INT())
                .column("name", DataTypes.STRING())
                .column("v", DataTypes.BIGINT());
    }

    /** Reads buckets 0 and 1 from the beginning until want rows came, handing each to each. */
    static void scan(LogScanner sc, int want, Consumer<InternalRow> each) throws Exception {
        int got = 0;
        try (LogScanner s = sc) {
            for (int b : BUCKETS) s.subscribeFromBeginning(b);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(SCAN_TIMEOUT_S);
            while (got < want && System.nanoTime() < deadline) {
                for (ScanRecord r : s.poll(Duration.ofMillis(500))) {
                    each.accept(r.getRow());
                    got++;
                }
            }
        }
        check(got == want, "read " + got + " of " + want + " rows in " + SCAN_TIMEOUT_S + " s");
    }

    static <T> T get(Future<T> f) throws Exception {
        return f.get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
    }

    static void check(boolean cond, String msg) {
        if (!cond) throw new IllegalStateException(msg);
    }

    static void begin(String s) {
        step = s;
    }

    static void ok(String detail) {
        System.out.println("ok " + step + ": " + detail);
        System.out.flush();
    }

    static String env(String k, String d) {
        String v = System.getenv(k);
        return v == null || v.isEmpty() ? d : v;
    }
}
