-- The SQL of Fluss's "Building a Streaming Lakehouse" quickstart, Paimon tab
-- (website/docs/quickstart/lakehouse.md at v0.9.1-incubating), in its order. Differences:
--  - the Paimon warehouse is a local directory (${WAREHOUSE}), not s3://fluss/paimon, so the
--    catalog's 'paimon.s3.*' options and the tiering job's --datalake.paimon.s3.* arguments are
--    left out;
--  - "flink run fluss-flink-tiering.jar ..." from another terminal is the @flink-run directive;
--  - the doc says to wait ~30 s (table.datalake.freshness) before querying the lake: @until polls
--    the Paimon snapshots table until every order has been tiered.
-- "-- @" lines are scripts/flinkqs/Quickstart.java's directives; @expect checks the results: the
-- last lake snapshot holds every order, and the union read's SUM equals the lake's (all tiered).

CREATE CATALOG fluss_catalog WITH (
    'type' = 'fluss',
    'bootstrap.servers' = '${BOOTSTRAP}'
);

USE CATALOG fluss_catalog;

CREATE TABLE fluss_order (
    `order_key` BIGINT,
    `cust_key` INT NOT NULL,
    `total_price` DECIMAL(15, 2),
    `order_date` DATE,
    `order_priority` STRING,
    `clerk` STRING,
    `ptime` AS PROCTIME(),
    PRIMARY KEY (`order_key`) NOT ENFORCED
);

CREATE TABLE fluss_customer (
    `cust_key` INT NOT NULL,
    `name` STRING,
    `phone` STRING,
    `nation_key` INT NOT NULL,
    `acctbal` DECIMAL(15, 2),
    `mktsegment` STRING,
    PRIMARY KEY (`cust_key`) NOT ENFORCED
);

CREATE TABLE fluss_nation (
  `nation_key` INT NOT NULL,
  `name`       STRING,
   PRIMARY KEY (`nation_key`) NOT ENFORCED
);

EXECUTE STATEMENT SET
BEGIN
    INSERT INTO fluss_nation SELECT * FROM `default_catalog`.`default_database`.source_nation;
    INSERT INTO fluss_customer SELECT * FROM `default_catalog`.`default_database`.source_customer;
    INSERT INTO fluss_order SELECT * FROM `default_catalog`.`default_database`.source_order;
END;

-- @flink-run ${TIERING_JAR} --fluss.bootstrap.servers ${BOOTSTRAP} --datalake.format paimon --datalake.paimon.metastore filesystem --datalake.paimon.warehouse ${WAREHOUSE}

CREATE TABLE datalake_enriched_orders (
    `order_key` BIGINT,
    `cust_key` INT NOT NULL,
    `total_price` DECIMAL(15, 2),
    `order_date` DATE,
    `order_priority` STRING,
    `clerk` STRING,
    `cust_name` STRING,
    `cust_phone` STRING,
    `cust_acctbal` DECIMAL(15, 2),
    `cust_mktsegment` STRING,
    `nation_name` STRING,
    PRIMARY KEY (`order_key`) NOT ENFORCED
) WITH (
    'table.datalake.enabled' = 'true',
    'table.datalake.freshness' = '30s'
);

-- insert tuples into datalake_enriched_orders
INSERT INTO datalake_enriched_orders
SELECT o.order_key,
       o.cust_key,
       o.total_price,
       o.order_date,
       o.order_priority,
       o.clerk,
       c.name,
       c.phone,
       c.acctbal,
       c.mktsegment,
       n.name
FROM fluss_order o
LEFT JOIN fluss_customer FOR SYSTEM_TIME AS OF `o`.`ptime` AS `c`
    ON o.cust_key = c.cust_key
LEFT JOIN fluss_nation FOR SYSTEM_TIME AS OF `o`.`ptime` AS `n`
    ON c.nation_key = n.nation_key;

-- @await fluss_nation=${NATIONS} fluss_customer=${CUSTOMERS} fluss_order=${ORDERS} datalake_enriched_orders=${ORDERS}

-- @until ${ORDERS} SELECT COALESCE(MAX(total_record_count), 0) FROM datalake_enriched_orders$lake$snapshots

-- use tableau result mode
SET 'sql-client.execution.result-mode' = 'tableau';

-- switch to batch mode
SET 'execution.runtime-mode' = 'batch';

-- query snapshots in paimon
SELECT snapshot_id, total_record_count FROM datalake_enriched_orders$lake$snapshots;
-- @expect notnull=snapshot_id last.total_record_count=${ORDERS}

-- to sum prices of all orders in paimon
SELECT sum(total_price) as sum_price FROM datalake_enriched_orders$lake;
-- @expect rows=1 notnull=sum_price

-- to sum prices of all orders in fluss and paimon
SELECT sum(total_price) as sum_price FROM datalake_enriched_orders;
-- @expect rows=1 same=prev

-- @cancel
