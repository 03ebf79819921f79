-- The quickstart's three source tables, in Flink's default catalog. Fluss's docker image makes
-- them with the faker connector (docker/quickstart-flink/sql/sql-client.sql at
-- v0.9.1-incubating); here Flink's built-in datagen connector makes the same columns and types,
-- bounded: keys are sequences (every customer and nation exists once), the rest is random.
-- NATIONS, CUSTOMERS, ORDERS and RATE (rows per second) come from the environment.
CREATE TEMPORARY TABLE source_order (
    `order_key` BIGINT,
    `cust_key` INT,
    `total_price` DECIMAL(15, 2),
    `order_date` DATE,
    `order_priority` STRING,
    `clerk` STRING
) WITH (
  'connector' = 'datagen',
  'rows-per-second' = '${RATE}',
  'fields.order_key.kind' = 'sequence',
  'fields.order_key.start' = '1',
  'fields.order_key.end' = '${ORDERS}',
  'fields.cust_key.min' = '1',
  'fields.cust_key.max' = '${CUSTOMERS}',
  'fields.total_price.min' = '1',
  'fields.total_price.max' = '1000',
  'fields.order_priority.length' = '6',
  'fields.clerk.length' = '6'
);

CREATE TEMPORARY TABLE source_customer (
    `cust_key` INT,
    `name` STRING,
    `phone` STRING,
    `nation_key` INT NOT NULL,
    `acctbal` DECIMAL(15, 2),
    `mktsegment` STRING,
    PRIMARY KEY (`cust_key`) NOT ENFORCED
) WITH (
  'connector' = 'datagen',
  'rows-per-second' = '${RATE}',
  'fields.cust_key.kind' = 'sequence',
  'fields.cust_key.start' = '1',
  'fields.cust_key.end' = '${CUSTOMERS}',
  'fields.name.length' = '12',
  'fields.phone.length' = '12',
  'fields.nation_key.min' = '1',
  'fields.nation_key.max' = '${NATIONS}',
  'fields.acctbal.min' = '1',
  'fields.acctbal.max' = '1000',
  'fields.mktsegment.length' = '9'
);

CREATE TEMPORARY TABLE `source_nation` (
  `nation_key` INT NOT NULL,
  `name` STRING,
  PRIMARY KEY (`nation_key`) NOT ENFORCED
) WITH (
  'connector' = 'datagen',
  'rows-per-second' = '${RATE}',
  'fields.nation_key.kind' = 'sequence',
  'fields.nation_key.start' = '1',
  'fields.nation_key.end' = '${NATIONS}',
  'fields.name.length' = '8'
);

-- As the docker image's init SQL sets it: source_order.cust_key is nullable, fluss_order's is not.
SET 'table.exec.sink.not-null-enforcer' = 'DROP';
