import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsLoad

/// The default data-loading step and the pipeline's use of it.
final class PipelineDataLoaderTests: XCTestCase {
    func testReadsFilesDataAndFileURLs() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 90, height: 60)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let loader = DataLoader()

        let file = try await loader.loadData(for: .file(path))
        XCTAssertEqual(file.input, .file(path), "files are left for libvips to stream, not read here")
        XCTAssertEqual(file.byteCount, bytes.count)
        let url = try await loader.loadData(for: .url(URL(fileURLWithPath: path)))
        XCTAssertEqual(url.input, .file(path))
        let memory = try await loader.loadData(for: .data(bytes, identifier: "photo"))
        XCTAssertEqual(memory.input, .data(bytes))
        XCTAssertEqual(memory.byteCount, bytes.count)
    }

    func testFailsClearlyForMissingFilesDirectoriesAndRemoteURLs() async throws {
        let folder = try ImageFolder()
        let loader = DataLoader()
        let cases: [(ImageSource, VipsError.Kind, String)] = [
            (.file(folder.path + "/missing.jpg"), .fileNotFound, "missing.jpg"),
            (.file(folder.path), .io, "not a regular file"),
            (.url(URL(string: "ftp://example.com/a.jpg")!), .unsupportedSource, "'ftp' URLs")
        ]
        for (source, kind, text) in cases {
            do {
                _ = try await loader.loadData(for: source)
                XCTFail("\(source) loaded")
            } catch {
                XCTAssertEqual(error.kind, kind, "\(source)")
                XCTAssertTrue(error.message.contains(text), "\(error.message)")
            }
        }
    }

    func testRemoteURLsGoToTheConfiguredRemoteLoader() async throws {
        /// Serves every URL from bytes held in memory: an `ImageDataLoading`
        /// in its own right, standing where the HTTP loader will.
        struct MemoryLoader: ImageDataLoading {
            let bytes: Data
            func loadData(for source: ImageSource) async throws(VipsError) -> ImageData {
                ImageData(input: .data(bytes), byteCount: bytes.count)
            }
        }
        let bytes = try ImageSynthesizer.data(width: 64, height: 48, format: .png())
        let pipeline = ImagePipeline(
            configuration: .init(dataLoader: DataLoader(remoteLoader: MemoryLoader(bytes: bytes))))
        let bitmap = try await pipeline.image(
            for: ImageRequest(source: .url(URL(string: "https://example.com/a.png")!)))
        XCTAssertEqual([bitmap.width, bitmap.height], [64, 48])
    }

    func testPipelineDecodesInMemoryDataAndSharesKeysAcrossFileSpellings() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("photo", width: 70, height: 50)
        let pipeline = ImagePipeline.testing()
        let bytes = try ImageSynthesizer.data(width: 30, height: 20, format: .webp())
        let fromData = try await pipeline.image(for: ImageRequest(source: .data(bytes, identifier: "inline")))
        XCTAssertEqual(fromData.width, 30)

        _ = try await pipeline.image(for: ImageRequest(path: path))
        // The same file named by a file:// URL is the same cache key: a memory hit.
        let viaURL = try await pipeline.image(for: ImageRequest(source: .url(URL(fileURLWithPath: path))))
        XCTAssertEqual(viaURL.width, 70)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 2)
        XCTAssertEqual(pipeline.metrics.memoryHits, 1)

        // Remote sources fail for every caller (nothing listens on port 1), and are tried again next time.
        let remote = ImageRequest(source: .url(URL(string: "http://127.0.0.1:1/x.jpg")!))
        for _ in 0..<2 {
            do {
                _ = try await pipeline.image(for: remote)
                XCTFail("loaded from a closed port")
            } catch {
                XCTAssertEqual(error.kind, .network, "\(error)")
            }
        }
        XCTAssertEqual(pipeline.metrics.dataLoadsStarted, 4)
        XCTAssertEqual(pipeline.metrics.failed, 2)
    }

    func testStrictDecodingAndPixelLimitComeFromTheConfiguration() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("big", width: 300, height: 200)
        var configuration = ImagePipeline.Configuration(memoryCache: nil)
        configuration.maxPixelCount = 50_000
        configuration.isStrictDecoding = true
        XCTAssertTrue(configuration.decodeOptions.strict)
        let pipeline = ImagePipeline(configuration: configuration)
        do {
            _ = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(10)))
            XCTFail("a 60,000-pixel image passed a 50,000-pixel limit")
        } catch {
            XCTAssertEqual(error.kind, .tooLarge)
        }
        // A file cut short fails in strict mode instead of decoding grey.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try folder.jpeg("small", width: 100, height: 100)))
        let cut = try folder.write("cut.jpg", bytes.prefix(bytes.count / 2))
        do {
            _ = try await pipeline.image(for: ImageRequest(path: cut))
            XCTFail("a truncated file decoded in strict mode")
        } catch {
            XCTAssertTrue([.truncatedData, .corruptData].contains(error.kind), "\(error)")
        }
        XCTAssertNil(pipeline.memoryCache)
    }

    func testTheTestPipelineRunsOnTheDefaultLoadersLanes() {
        for pipeline in [ImagePipeline.testing(), ImagePipeline(configuration: .init())] {
            XCTAssertTrue(pipeline.engine.readsLocalSources, "local sources on the I/O lane")
            XCTAssertNotNil(pipeline.engine.httpLoader, "downloads by the pipeline's own HTTP loader")
        }
        let custom = ImagePipeline.testing(loader: GatedLoader())
        XCTAssertFalse(custom.engine.readsLocalSources, "another loader is called for every source")
        XCTAssertNil(custom.engine.httpLoader)
    }
}
