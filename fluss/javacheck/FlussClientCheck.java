import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.metadata.DatabaseDescriptor;
import org.apache.fluss.metadata.Schema;
import org.apache.fluss.metadata.SchemaInfo;
import org.apache.fluss.metadata.TableDescriptor;
import org.apache.fluss.metadata.TableInfo;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.types.DataTypes;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * The real Fluss 0.9.1 Java client's Admin API against a Strom node's fluss.listen (check.sh
 * runs it). Each step prints "ok STEP: detail"; the last line is "PASS", or "FAIL STEP: cause"
 * with exit code 1. Steps: Flink's catalog probes (the database fluss exists, fluss_catalog
 * does not, fluss.default_catalog is TableNotExist); the server nodes; create a database (and
 * again: DatabaseAlreadyExist, and with ignoreIfExists); create a log table and a primary-key
 * table (and again: TableAlreadyExist); list databases and tables; table existence; table info
 * and schema of both, compared with what was created; drop the database while not empty
 * (DatabaseNotEmpty); drop both tables (and again: TableNotExist, and with ignoreIfNotExists);
 * drop the database (and again: DatabaseNotExist).
 */
public class FlussClientCheck {
    private static final long CALL_TIMEOUT_S = 60;
    private static String step = "connect";

    public static void main(String[] args) {
        Configuration conf = new Configuration();
        conf.setString("bootstrap.servers", args[0]);
        int rc = 0;
        try (Connection c = ConnectionFactory.createConnection(conf); Admin admin = c.getAdmin()) {
            run(admin, "javacheck_" + System.currentTimeMillis() / 1000);
            System.out.println("PASS");
        } catch (Throwable t) {
            Throwable root = t;
            while (root.getCause() != null && root.getCause() != root) root = root.getCause();
            t.printStackTrace();
            System.out.println("FAIL " + step + ": " + root.getClass().getName() + ": " + root.getMessage());
            rc = 1;
        }
        System.out.flush();
        System.exit(rc); // the client's non-daemon threads may linger after close
    }

    static void run(Admin admin, String db) throws Exception {
        TablePath logPath = TablePath.of(db, "events");
        TablePath pkPath = TablePath.of(db, "users");

        step = "probes";
        check(get(admin.databaseExists("fluss")), "the database fluss does not exist");
        check(!get(admin.databaseExists("fluss_catalog")), "fluss_catalog exists");
        check(!get(admin.databaseExists("default_catalog")), "default_catalog exists");
        fails(admin.getTableInfo(TablePath.of("fluss", "default_catalog")), "TableNotExistException");
        ok("fluss exists, fluss_catalog and default_catalog do not, fluss.default_catalog is TableNotExist");

        step = "server_nodes";
        ok(get(admin.getServerNodes()).toString());

        step = "create_database";
        get(admin.createDatabase(db, DatabaseDescriptor.builder().comment("java check").build(), false));
        fails(admin.createDatabase(db, DatabaseDescriptor.EMPTY, false), "DatabaseAlreadyExistException");
        get(admin.createDatabase(db, DatabaseDescriptor.EMPTY, true));
        check(get(admin.databaseExists(db)), "database " + db + " not found after create");
        ok(db);

        step = "create_tables";
        Schema logSchema = Schema.newBuilder()
                .column("id", DataTypes.BIGINT())
                .column("name", DataTypes.STRING())
                .withComment("who")
                .column("ts", DataTypes.TIMESTAMP(3))
                .build();
        get(admin.createTable(logPath, TableDescriptor.builder().schema(logSchema).distributedBy(3)
                .comment("a log table").build(), false));
        Schema pkSchema = Schema.newBuilder()
                .column("k", DataTypes.INT())
                .column("v", DataTypes.STRING())
                .column("n", DataTypes.DECIMAL(10, 2))
                .primaryKey("k")
                .build();
        get(admin.createTable(pkPath, TableDescriptor.builder().schema(pkSchema).distributedBy(2, "k").build(), false));
        fails(admin.createTable(logPath, TableDescriptor.builder().schema(logSchema).build(), false), "TableAlreadyExistException");
        get(admin.createTable(logPath, TableDescriptor.builder().schema(logSchema).build(), true));
        ok(logPath + ", " + pkPath);

        step = "list";
        List<String> dbs = get(admin.listDatabases());
        check(dbs.contains("fluss") && dbs.contains(db), "listDatabases " + dbs);
        List<String> tables = get(admin.listTables(db));
        check(tables.size() == 2 && tables.contains("events") && tables.contains("users"), "listTables " + tables);
        fails(admin.listTables("no_such_db"), "DatabaseNotExistException");
        ok("databases " + dbs + ", tables " + tables);

        step = "exists";
        check(get(admin.tableExists(logPath)) && get(admin.tableExists(pkPath)), "a created table does not exist");
        check(!get(admin.tableExists(TablePath.of(db, "nope"))), db + ".nope exists");
        ok("both tables exist, " + db + ".nope does not");

        step = "table_info";
        TableInfo log = get(admin.getTableInfo(logPath));
        check(log.getNumBuckets() == 3 && !log.hasPrimaryKey(), "events: " + log);
        check(log.getComment().orElse("").equals("a log table"), "events comment " + log.getComment());
        check(log.getSchema().getColumnNames().equals(Arrays.asList("id", "name", "ts")), "events columns " + log.getSchema());
        check(log.getSchema().getRowType().equals(logSchema.getRowType()), "events row type " + log.getSchema().getRowType());
        TableInfo pk = get(admin.getTableInfo(pkPath));
        check(pk.getNumBuckets() == 2 && pk.getPrimaryKeys().equals(Arrays.asList("k")), "users: " + pk);
        check(pk.getSchema().getRowType().equals(pkSchema.getRowType()), "users row type " + pk.getSchema().getRowType());
        check(log.getTableId() != pk.getTableId(), "both tables have id " + log.getTableId());
        ok("events id " + log.getTableId() + " " + log.getSchema().getRowType() + "; users id " + pk.getTableId() + " " + pk.getSchema().getRowType());

        step = "table_schema";
        SchemaInfo si = get(admin.getTableSchema(pkPath));
        check(si.getSchemaId() == pk.getSchemaId() && si.getSchema().getPrimaryKeyColumnNames().equals(Arrays.asList("k")), "users schema " + si);
        fails(admin.getTableInfo(TablePath.of(db, "nope")), "TableNotExistException");
        ok("users schema " + si.getSchemaId());

        step = "drop";
        fails(admin.dropDatabase(db, false, false), "DatabaseNotEmptyException");
        get(admin.dropTable(logPath, false));
        fails(admin.dropTable(logPath, false), "TableNotExistException");
        get(admin.dropTable(logPath, true));
        check(!get(admin.tableExists(logPath)), "events exists after drop");
        get(admin.dropDatabase(db, false, true));
        check(!get(admin.databaseExists(db)), db + " exists after drop");
        fails(admin.dropDatabase(db, false, false), "DatabaseNotExistException");
        get(admin.dropDatabase(db, true, false));
        ok("events, then " + db + " with users (cascade)");
    }

    static <T> T get(Future<T> f) throws Exception {
        return f.get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
    }

    /** f fails with the exception class named want (its simple name). */
    static void fails(Future<?> f, String want) throws Exception {
        try {
            f.get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            check(c != null && c.getClass().getSimpleName().equals(want), "want " + want + ", got " + c);
            return;
        }
        throw new IllegalStateException("want " + want + ", got success");
    }

    static void check(boolean cond, String msg) {
        if (!cond) throw new IllegalStateException(msg);
    }

    static void ok(String detail) {
        System.out.println("ok " + step + ": " + detail);
        System.out.flush();
    }
}
