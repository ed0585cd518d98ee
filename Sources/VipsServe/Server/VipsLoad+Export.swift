// A server is made over an `ImagePipeline` (and its `DiskCache`, `ImageFormat`, `VipsError`): a
// program that imports VipsServe sees VipsLoad (and through it VipsCore), so `import VipsServe`
// alone is enough to write one, as `import VipsLoad` alone is for the pipeline.
@_exported import VipsLoad
