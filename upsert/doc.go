// Package upsert makes a table in upsert mode hold one row per key: the
// latest change of each key an epoch brings replaces the key's rows in the
// table, or deletes them, through deletion vectors written with the
// epoch's commit (Resolve). It is pure: it knows nothing of actors or
// Kafka, and reaches storage through storage.Store and the Delta log
// through delta.Snapshot.
//
// A key is the values of the table's key columns, encoded by Keys the
// same whether read from a mapped row or from a data file. Each change
// carries a sequence (the Kafka offset: a key's records share a
// partition); an epoch's changes of one key collapse to the one with the
// highest sequence.
package upsert
