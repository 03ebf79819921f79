// PaimonCheck: real Fluss 0.9.1 and Paimon 1.3.1 code on the lake tables
// Strom creates (fluss/paimon). Modes:
//
//   create WAREHOUSE DB TABLE DESCRIPTOR.json
//       Fluss's own PaimonLakeCatalog.createTable (fluss-lake-paimon 0.9.1)
//       of the Fluss table descriptor JSON, as the coordinator calls it: the
//       reference schema-0 the Go code is compared with.
//   read WAREHOUSE DB TABLE
//       Paimon's FileSystemCatalog opens the table (a table Strom made),
//       prints its fields, keys, options and bucket, writes one row (the
//       key columns set, the rest null), commits it, and reads the table
//       back, printing the row count.
//   keys
//       Fluss 0.9.1's PaimonKeyEncoder and PaimonBucketingFunction on a few
//       keys: the vectors of fluss/paimon's key test.
//
// Classpath: fluss-server (it holds fluss-common), fluss-lake-paimon,
// paimon-bundle, flink-shaded-hadoop-2-uber (the servers' plugins/paimon).
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public class PaimonCheck {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "create": create(args[1], args[2], args[3], args[4]); break;
            case "read": read(args[1], args[2], args[3]); break;
            case "keys": keys(); break;
            default: throw new IllegalArgumentException(args[0]);
        }
    }

    static Map<String, String> catalogConf(String warehouse) {
        Map<String, String> m = new HashMap<>();
        m.put("metastore", "filesystem");
        m.put("warehouse", warehouse);
        return m;
    }

    static void create(String warehouse, String db, String table, String descFile) throws Exception {
        byte[] json = Files.readAllBytes(Paths.get(descFile));
        org.apache.fluss.metadata.TableDescriptor d = org.apache.fluss.metadata.TableDescriptor.fromJsonBytes(json);
        org.apache.fluss.lake.paimon.PaimonLakeCatalog cat = new org.apache.fluss.lake.paimon.PaimonLakeCatalog(
                org.apache.fluss.config.Configuration.fromMap(catalogConf(warehouse)));
        cat.createTable(org.apache.fluss.metadata.TablePath.of(db, table), d,
                new org.apache.fluss.lake.lakestorage.LakeCatalog.Context() {
                    public boolean isCreatingFlussTable() { return true; }
                    public org.apache.fluss.security.acl.FlussPrincipal getFlussPrincipal() {
                        return org.apache.fluss.security.acl.FlussPrincipal.ANONYMOUS; }
                    public org.apache.fluss.metadata.TableDescriptor getCurrentTable() { return null; }
                    public org.apache.fluss.metadata.TableDescriptor getExpectedTable() { return d; }
                });
        cat.close();
        System.out.println(new String(Files.readAllBytes(Paths.get(warehouse, db + ".db", table, "schema", "schema-0")), StandardCharsets.UTF_8));
    }

    static void read(String warehouse, String db, String table) throws Exception {
        org.apache.paimon.catalog.Catalog cat = org.apache.paimon.catalog.CatalogFactory.createCatalog(
                org.apache.paimon.catalog.CatalogContext.create(org.apache.paimon.options.Options.fromMap(catalogConf(warehouse))));
        org.apache.paimon.table.FileStoreTable t = (org.apache.paimon.table.FileStoreTable)
                cat.getTable(org.apache.paimon.catalog.Identifier.create(db, table));
        org.apache.paimon.types.RowType rt = t.rowType();
        System.out.println("fields " + rt.getFields());
        System.out.println("primaryKeys " + t.primaryKeys());
        System.out.println("partitionKeys " + t.partitionKeys());
        System.out.println("bucket " + t.coreOptions().bucket() + " bucketKey " + t.schema().bucketKeys());
        System.out.println("options " + new java.util.TreeMap<>(t.options()));
        // one row: the key, NOT NULL and system columns set, the rest null
        List<String> keys = t.primaryKeys().isEmpty() ? t.schema().bucketKeys() : t.primaryKeys();
        org.apache.paimon.data.GenericRow row = new org.apache.paimon.data.GenericRow(rt.getFieldCount());
        for (int i = 0; i < rt.getFieldCount(); i++) {
            org.apache.paimon.types.DataField f = rt.getFields().get(i);
            if (keys.contains(f.name()) || !f.type().isNullable() || f.name().startsWith("__")) {
                row.setField(i, sample(f.type()));
            }
        }
        org.apache.paimon.table.sink.BatchWriteBuilder wb = t.newBatchWriteBuilder();
        try (org.apache.paimon.table.sink.BatchTableWrite w = wb.newWrite();
             org.apache.paimon.table.sink.BatchTableCommit c = wb.newCommit()) {
            w.write(row);
            c.commit(w.prepareCommit());
        }
        org.apache.paimon.table.source.ReadBuilder rb = t.newReadBuilder();
        long n = 0;
        try (org.apache.paimon.reader.RecordReader<org.apache.paimon.data.InternalRow> r =
                     rb.newRead().createReader(rb.newScan().plan())) {
            org.apache.paimon.reader.RecordReaderIterator<org.apache.paimon.data.InternalRow> it =
                    new org.apache.paimon.reader.RecordReaderIterator<>(r);
            while (it.hasNext()) { it.next(); n++; }
        }
        System.out.println("rows " + n);
        cat.close();
    }

    static Object sample(org.apache.paimon.types.DataType t) {
        switch (t.getTypeRoot()) {
            case INTEGER: case DATE: return 7;
            case BIGINT: return 7L;
            case SMALLINT: return (short) 7;
            case TINYINT: return (byte) 7;
            case BOOLEAN: return true;
            case FLOAT: return 7f;
            case DOUBLE: return 7d;
            case CHAR: case VARCHAR: return org.apache.paimon.data.BinaryString.fromString("k7");
            case BINARY: case VARBINARY: return new byte[] {7};
            case DECIMAL: {
                org.apache.paimon.types.DecimalType d = (org.apache.paimon.types.DecimalType) t;
                return org.apache.paimon.data.Decimal.fromBigDecimal(new java.math.BigDecimal("7"), d.getPrecision(), d.getScale());
            }
            default: return org.apache.paimon.data.Timestamp.fromEpochMillis(7);
        }
    }

    static void keys() {
        org.apache.fluss.types.RowType rt = org.apache.fluss.types.RowType.of(
                new org.apache.fluss.types.DataType[] {
                        org.apache.fluss.types.DataTypes.BIGINT(), org.apache.fluss.types.DataTypes.INT(),
                        org.apache.fluss.types.DataTypes.STRING(), org.apache.fluss.types.DataTypes.DECIMAL(15, 2)},
                new String[] {"a", "b", "s", "d"});
        Object[][] rows = {
                {1L, 5, "x", "1.50"}, {10000L, -3, "a longer string value", "123456789.99"},
                {-1L, 0, "", "0.00"}, {123456789012L, 2147483647, "1234567", "-7.25"}, {42L, 1, "12345678", "100.00"},
        };
        String[][] keySets = {{"a"}, {"b"}, {"s"}, {"d"}, {"a", "b"}, {"b", "s"}};
        org.apache.fluss.bucketing.PaimonBucketingFunction bf = new org.apache.fluss.bucketing.PaimonBucketingFunction();
        for (String[] ks : keySets) {
            org.apache.fluss.row.encode.paimon.PaimonKeyEncoder enc =
                    new org.apache.fluss.row.encode.paimon.PaimonKeyEncoder(rt, java.util.Arrays.asList(ks));
            for (Object[] r : rows) {
                org.apache.fluss.row.GenericRow g = org.apache.fluss.row.GenericRow.of(
                        r[0], r[1], org.apache.fluss.row.BinaryString.fromString((String) r[2]),
                        org.apache.fluss.row.Decimal.fromBigDecimal(new java.math.BigDecimal((String) r[3]), 15, 2));
                byte[] k = enc.encodeKey(g);
                StringBuilder hex = new StringBuilder();
                for (byte b : k) hex.append(String.format("%02x", b));
                System.out.printf("{\"keys\":\"%s\",\"row\":[%d,%d,\"%s\",\"%s\"],\"key\":\"%s\",\"buckets\":{\"1\":%d,\"3\":%d,\"7\":%d,\"16\":%d}}%n",
                        String.join(",", ks), r[0], r[1], r[2], r[3], hex, bf.bucketing(k, 1), bf.bucketing(k, 3),
                        bf.bucketing(k, 7), bf.bucketing(k, 16));
            }
        }
    }
}
