// The lock types (`Lock`, `LockedState`) and `Duration.dispatchInterval` live in VipsSync, below
// the decode core, so the server's HTTP layer can use them without importing the decode core.
// Every module that imports VipsCore sees them as before.
@_exported import VipsSync
