-- V0015: the current state leaves room on each page for about four more versions of each row
-- (fillfactor 20 instead of V0011's 50; measurements in docs/benchmarks.md "Current state:
-- room for HOT updates").
--
-- An update that stays in its grid cell is HOT (V0011) only if the new version fits on the page
-- of the old one. HOT pruning frees a dead version only once no running transaction can still
-- see it: with a batch in every transaction and two writers, that is one to two batches later.
-- When batches are large (a live stream near the machine's limit, a backlog), a page must hold,
-- for each of its rows, the live version, the one being written and one or two dead ones. At
-- fillfactor 50 (~16 vehicles a page) it often cannot: the update is not HOT, writes entries
-- into the primary key and the cells' SP-GiST, and puts the row on a new page at the end of the
-- table, which grows. At 40,000 messages/s from 20,000 vehicles, 60 s: 92% of the updates were
-- HOT and the table grew from ~1,250 to ~14,000 pages; at fillfactor 20 (~6 vehicles a page)
-- 98.5% were HOT, the table kept its 5,000 pages and the upserts took 11-14% less time.
--
-- What it costs: a compact table's pages hold fewer rows, so a full scan of the current state
-- (QGIS, `updated_since`) reads 2.8x the pages: 33 ms instead of 24 for 100,000 vehicles. A
-- table at fillfactor 50 under a live stream grows past that size within a minute (until
-- autovacuum gives the space back). The API's statements fetch vehicles by their cells or their
-- key, one page a vehicle whatever the fillfactor. New vehicles cost more: a million of them
-- fill 2.5x the pages, and trackd stored them 18% slower (each vehicle once, 1M messages).
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0015__current_state_fillfactor.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice. It takes a brief lock and rewrites nothing: rows already stored keep their
-- pages until an update moves them (or `VACUUM FULL trackd.vehicle_current_state`, which holds
-- off readers and writers while it runs, packs the table to the new fillfactor at once).

ALTER TABLE trackd.vehicle_current_state SET (fillfactor = 20);

INSERT INTO trackd.schema_migrations (version, name) VALUES (15, 'current_state_fillfactor')
ON CONFLICT (version) DO NOTHING;
