-- The SQL of Fluss's "Real-Time Analytics with Flink" quickstart (website/docs/quickstart/flink.md
-- at v0.9.1-incubating), in its order, unchanged but for the bootstrap address. "-- @" lines are
-- Quickstart.java's directives: waiting as the quickstart's user does, and the checks of each
-- result.
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

CREATE TABLE enriched_orders (
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
);

EXECUTE STATEMENT SET
BEGIN
    INSERT INTO fluss_nation SELECT * FROM `default_catalog`.`default_database`.source_nation;
    INSERT INTO fluss_customer SELECT * FROM `default_catalog`.`default_database`.source_customer;
    INSERT INTO fluss_order SELECT * FROM `default_catalog`.`default_database`.source_order;
END;

INSERT INTO enriched_orders
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

-- The quickstart's user repeats SELECT COUNT(*) until the data is in.
-- @await fluss_nation=${NATIONS} fluss_customer=${CUSTOMERS} fluss_order=${ORDERS} enriched_orders=${ORDERS}

-- The quickstart leaves the enrichment job running; cancelled here so that what follows reads a
-- table no job writes.
-- @cancel

SET 'sql-client.execution.result-mode' = 'tableau';

SET 'execution.runtime-mode' = 'batch';

SET 'table.dml-sync' = 'true';

SELECT * FROM enriched_orders LIMIT 2;
-- @expect rows=2 notnull=cust_name,cust_phone,cust_acctbal,cust_mktsegment,nation_name

SELECT COUNT(*) FROM enriched_orders;
-- @expect count=${ORDERS}

SELECT * FROM fluss_customer WHERE `cust_key` = 1;
-- @expect rows=1 cust_key=1 notnull=name,phone

UPDATE fluss_customer SET `name` = 'fluss_updated' WHERE `cust_key` = 1;

SELECT * FROM fluss_customer WHERE `cust_key` = 1;
-- @expect rows=1 cust_key=1 name=fluss_updated

DELETE FROM fluss_customer WHERE `cust_key` = 1;

SELECT * FROM fluss_customer WHERE `cust_key` = 1;
-- @expect rows=0
