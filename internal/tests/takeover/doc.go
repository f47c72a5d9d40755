// Package takeover holds the tests of switching from the seed's Spark
// Structured Streaming job to deltaflow on real servers: the real Spark job
// (scripts/spark, pyspark 3.5.1 + delta-spark 3.2.0) fills a table from a real
// Kafka broker, `deltaflow takeover` reads its checkpoint, and `deltaflow run`
// continues; every test ends by accounting every Kafka record by its
// coordinates (kafka_partition, kafka_offset) in the table.
//
// Spark runs are few and shared: each JVM start costs 20-40 s on a 2-core
// machine.
package takeover
