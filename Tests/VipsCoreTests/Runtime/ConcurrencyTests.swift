import Dispatch
import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// Decoding from many threads at once gives exactly what decoding one at a time gives.
final class ConcurrencyTests: XCTestCase {
    let decoder = ImageDecoder()

    /// A dozen small, different inputs: every loader, alpha, orientation, memory and file.
    struct Corpus {
        let inputs: [ImageInput]
        let folder: TemporaryFolder
    }

    func makeCorpus() throws -> Corpus {
        let folder = try TemporaryFolder()
        let formats: [(ImageSynthesizer.Format, Bool)] = [
            (.jpeg(), false), (.jpeg(progressive: true, orientation: 6), false), (.jpeg(cmyk: true), false),
            (.png(), true), (.png(sixteenBit: true), false), (.png(palette: true), false),
            (.png(grey: true, interlaced: true), true),
            (.webp(), false), (.webp(lossless: true), true), (.gif, true), (.tiff, false),
            (.jpeg(orientation: 8), false)
        ]
        var inputs: [ImageInput] = []
        for (index, (format, alpha)) in formats.enumerated() {
            let data = try ImageSynthesizer.data(
                width: 320 - index * 8, height: 240, seed: 60 + index, alpha: alpha,
                marker: true, format: format)
            // Alternate memory and file inputs, so both source kinds run concurrently.
            inputs.append(
                index.isMultiple(of: 2)
                    ? .data(data) : .file(try folder.write(data, named: "\(index).\(format.fileExtension)")))
        }
        return Corpus(inputs: inputs, folder: folder)
    }

    /// The pixels of one decode, identified by input index and requested size.
    struct Result: Sendable, Equatable {
        let width: Int, height: Int, channels: Int
        let bytes: [UInt8]
        init(_ bitmap: Bitmap) {
            (width, height, channels, bytes) = (bitmap.width, bitmap.height, bitmap.channels, bitmap.bytes)
        }
    }

    /// Sizes that exercise JPEG and WebP shrink-on-load, plain reduce and the full-size path.
    static let sizes: [TargetSize] = [.maxPixelSize(64), .fit(width: 150, height: 90), .original, .maxPixelSize(31)]

    func serialReference(_ inputs: [ImageInput]) throws -> [[Result]] {
        try inputs.map { input in try Self.sizes.map { try Result(decoder.decode(input, size: $0)) } }
    }

    func testTaskGroupDecodesMatchSerialDecodes() async throws {
        let corpus = try makeCorpus()
        let reference = try serialReference(corpus.inputs)
        let decoder = self.decoder, inputs = corpus.inputs, sizeCount = Self.sizes.count
        let jobs = 240
        let results = try await withThrowingTaskGroup(of: (Int, Result).self) { group in
            for job in 0..<jobs {
                group.addTask {
                    let input = inputs[job % inputs.count], size = Self.sizes[(job / inputs.count) % sizeCount]
                    return (job, Result(try decoder.decode(input, size: size)))
                }
            }
            var collected: [Int: Result] = [:]
            for try await (job, result) in group { collected[job] = result }
            return collected
        }
        XCTAssertEqual(results.count, jobs)
        for job in 0..<jobs {
            let expected = reference[job % inputs.count][(job / inputs.count) % sizeCount]
            XCTAssertEqual(
                results[job], expected,
                "job \(job): input \(job % inputs.count) at \(Self.sizes[(job / inputs.count) % sizeCount])")
        }
    }

    func testConcurrentPerformDecodesMatchSerialDecodes() throws {
        let corpus = try makeCorpus()
        let reference = try serialReference(corpus.inputs)
        let decoder = self.decoder, inputs = corpus.inputs, sizeCount = Self.sizes.count
        let jobs = 200
        let results = LockedState<[Int: Result]>([:])
        let failures = LockedState<[String]>([])
        DispatchQueue.concurrentPerform(iterations: jobs) { job in
            let input = inputs[job % inputs.count], size = Self.sizes[(job / inputs.count) % sizeCount]
            do {
                let result = Result(try decoder.decode(input, size: size))
                results.withLock { $0[job] = result }
            } catch {
                failures.withLock { $0.append("job \(job): \(error)") }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        let collected = results.withLock { $0 }
        XCTAssertEqual(collected.count, jobs)
        for job in 0..<jobs {
            XCTAssertEqual(
                collected[job], reference[job % inputs.count][(job / inputs.count) % sizeCount], "job \(job)")
        }
    }

    func testConcurrentProbesAndFailuresStayCorrect() async throws {
        // Good and bad inputs interleaved: libvips' error buffer is global, yet every
        // failure must still fail as bad data and every success must still be right.
        let corpus = try makeCorpus()
        let expectedInfo = try corpus.inputs.map { try decoder.info($0) }
        let reference = try corpus.inputs.map { try Result(decoder.decode($0, size: .maxPixelSize(48))) }
        let jpeg = try ImageSynthesizer.data(width: 300, height: 200, seed: 70, format: .jpeg())
        let truncated = ImageInput.data(Data(jpeg.prefix(jpeg.count / 2)))
        let garbled = ImageInput.data(Data(Array("GIF89a".utf8) + [UInt8](repeating: 0x33, count: 400)))
        let lenient = decoder, strict = ImageDecoder(options: DecodeOptions(strict: true))
        let inputs = corpus.inputs

        enum Outcome: Sendable {
            case info(Int, ImageInfo), pixels(Int, Result), failed(VipsError), lenientTruncated(Int)
        }
        let warningsBefore = VipsRuntime.warningCount
        let jobs = 300
        let outcomes = await withTaskGroup(of: Outcome.self) { group in
            for job in 0..<jobs {
                group.addTask {
                    let index = job % inputs.count
                    do throws(VipsError) {
                        switch job % 5 {
                        case 0: return .info(index, try lenient.info(inputs[index]))
                        case 1:
                            return .pixels(index, Result(try lenient.decode(inputs[index], size: .maxPixelSize(48))))
                        case 2: return .lenientTruncated(try lenient.decode(truncated, size: .maxPixelSize(48)).width)
                        case 3: _ = try strict.decode(truncated, size: .maxPixelSize(48))
                        default: _ = try lenient.decode(garbled, size: .maxPixelSize(48))
                        }
                        return .failed(VipsError(.internal, "job \(job) should have failed"))
                    } catch {
                        return .failed(error)
                    }
                }
            }
            var all: [Outcome] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        XCTAssertEqual(outcomes.count, jobs)
        var failures = 0, truncatedDecodes = 0
        for outcome in outcomes {
            switch outcome {
            case .info(let index, let info): XCTAssertEqual(info, expectedInfo[index])
            case .pixels(let index, let result): XCTAssertEqual(result, reference[index], "input \(index)")
            case .lenientTruncated(let width):
                XCTAssertEqual(width, 48)
                truncatedDecodes += 1
            case .failed(let error):
                failures += 1
                XCTAssertTrue([.truncatedData, .corruptData].contains(error.kind), "\(error)")
            }
        }
        XCTAssertEqual(failures, jobs * 2 / 5, "exactly the strict-truncated and garbled jobs fail")
        XCTAssertEqual(truncatedDecodes, jobs / 5)
        XCTAssertGreaterThanOrEqual(
            VipsRuntime.warningCount - warningsBefore, truncatedDecodes,
            "every lenient truncated decode counts its warning")
    }
}
