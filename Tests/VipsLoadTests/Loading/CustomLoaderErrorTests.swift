import Foundation
import VipsCore
import XCTest

@testable import VipsLoad

/// A custom loader throws what its building blocks throw; the pipeline's
/// callers get one `VipsError` for it, of the kind it means, with the
/// loader's error as `underlying`.
final class CustomLoaderErrorTests: XCTestCase {
    /// Reads `store:NAME` sources from a folder with Foundation, as a user would write it.
    private struct StoreLoader: ImageDataLoading {
        let folder: URL
        func loadData(for source: ImageSource) async throws -> ImageData {
            guard case .url(let url) = source.location else { throw StoreError.notAStoreSource }
            let name = url.absoluteString.dropFirst("store:".count)
            if name == "odd" { throw StoreError.notAStoreSource }
            if name == "cancel" { throw CancellationError() }
            if name == "typed" { throw VipsError(.httpStatus, "HTTP 410", source: source.description, httpStatus: 410) }
            let data = try Data(contentsOf: folder.appendingPathComponent(String(name)))
            return ImageData(input: .data(data), byteCount: data.count)
        }
    }

    private enum StoreError: Error { case notAStoreSource }

    private func failure(_ pipeline: ImagePipeline, _ name: String) async -> VipsError? {
        do {
            _ = try await pipeline.image(
                for: ImageRequest(url: URL(string: "store:\(name)")!, size: .maxPixelSize(32)))
            return nil
        } catch {
            return error
        }
    }

    func testALoadersFoundationAndOwnErrorsReachCallersAsOneVipsError() async throws {
        let folder = try ImageFolder()
        _ = try folder.jpeg("present", width: 64, height: 48)
        let loader = StoreLoader(folder: URL(fileURLWithPath: folder.path))
        for pipeline in [
            ImagePipeline.testing(loader: loader), ImagePipeline.testing(loader: DataLoader(remoteLoader: loader))
        ] {
            let bitmap = try await pipeline.image(
                for: ImageRequest(url: URL(string: "store:present.jpg")!, size: .maxPixelSize(32)))
            XCTAssertEqual([bitmap.width, bitmap.height], [32, 24])

            let missing = await failure(pipeline, "absent.jpg")
            XCTAssertEqual(missing?.kind, .fileNotFound, "\(String(describing: missing))")
            XCTAssertEqual(missing?.source, "store:absent.jpg")
            XCTAssertTrue(missing?.underlying is CocoaError, "\(String(describing: missing?.underlying))")

            let odd = await failure(pipeline, "odd")
            XCTAssertEqual(odd?.kind, .io)
            XCTAssertTrue(odd?.message.hasPrefix("store:odd: ") == true, "\(String(describing: odd))")
            XCTAssertTrue(odd?.underlying is StoreError)

            let cancelled = await failure(pipeline, "cancel")
            XCTAssertEqual(cancelled?.kind, .cancelled)

            let typed = await failure(pipeline, "typed")
            XCTAssertEqual(typed, VipsError(.httpStatus, "HTTP 410", source: "store:typed", httpStatus: 410))
            XCTAssertNil(typed?.underlying, "a VipsError is not wrapped")
        }
    }

    func testTheMappingOfFoundationErrors() {
        let cases: [(any Error, VipsError.Kind)] = [
            (URLError(.timedOut), .timedOut), (URLError(.cannotConnectToHost), .network),
            (URLError(.cancelled), .cancelled), (URLError(.badServerResponse), .protocolError),
            (CocoaError(.fileReadNoPermission), .permissionDenied), (POSIXError(.ENOENT), .fileNotFound),
            (POSIXError(.ECONNREFUSED), .network), (CocoaError(.fileWriteOutOfSpace), .io)
        ]
        for (error, kind) in cases {
            let reported = VipsError(loading: error, source: "store:x")
            XCTAssertEqual(reported.kind, kind, "\(error)")
            XCTAssertEqual(reported.source, "store:x")
            XCTAssertNotNil(reported.underlying)
        }
    }
}
