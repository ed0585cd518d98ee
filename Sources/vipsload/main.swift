import VipsCore
import Foundation
let t0 = Date()
let d = try ImageSynthesizer.data(width: 4000, height: 3000, seed: 3, marker: true, format: .jpeg(quality: 90, progressive: false, orientation: 6))
print("gen", Date().timeIntervalSince(t0), d.count)
try d.write(to: URL(fileURLWithPath: "/tmp/t6.jpg"))
let dec = ImageDecoder()
print(try dec.info(.data(d)))
let t1 = Date()
for _ in 0..<10 { _ = try dec.decode(.data(d), size: .maxPixelSize(256)) }
print("10 thumbs", Date().timeIntervalSince(t1))
let b = try dec.decode(.data(d), size: .maxPixelSize(256))
print(b.width, b.height, b.channels, b.pixel(x: 0, y: 0)!, b.pixel(x: b.width-1, y: 0)!)
try ImageEncoder().encode(b, as: .png()).write(to: URL(fileURLWithPath: "/tmp/t6thumb.png"))
