// Test hook: with TRACKD_TEST_ARCHIVE_PAUSE_AT=<name>[@<file>] in the environment, the archiver
// stops at the named step (once per process), logs "archive paused at <name>" and waits until
// killed, or until <file> exists and then goes on. The crash test uses it to
// SIGKILL the archiver at exact points of a commit; unset (always, in production) it costs one
// string comparison per step.
#pragma once

namespace trackd::archive {

// Steps: "data-files-written", "metadata-written", "catalog-transaction" (inside the catalog's
// transaction, before COMMIT), "committed".
void pause_point(const char* name);

}  // namespace trackd::archive
