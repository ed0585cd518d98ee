import Foundation
import VipsCore

// What `vipsload thumb --format jpeg --quality 75` does for each file (decode to fit SIZE×SIZE,
// encode JPEG, write), on the calling thread only, so callgrind counts one image's work and
// nothing else. Exit status 1 when any file failed.
let arguments = CommandLine.arguments
guard arguments.count >= 4, let size = Int(arguments[1]), size > 0 else {
    FileHandle.standardError.write(Data("usage: ProfileThumb SIZE OUTDIR FILE...\n".utf8))
    exit(2)
}
let folder = URL(fileURLWithPath: arguments[2])
// libvips starts up front: the direct paths start it only when a file needs it, which would put
// its start-up into whichever file that is, not into the start-up figure.
do throws(VipsError) { try VipsRuntime.start() } catch {
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    exit(1)
}
let decoder = ImageDecoder()
var failed = false
for path in arguments[3...] {
    do throws(VipsError) {
        let bitmap = try decoder.decode(.file(path), size: .maxPixelSize(size))
        // As `thumb` encodes: transparency flattened onto its default white background.
        let data = try ImageEncoder().encode(bitmap, as: OutputFormat.jpeg(quality: 75), background: .white).data
        let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent + ".jpg"
        do { try data.write(to: folder.appendingPathComponent(name)) } catch { failed = true }
    } catch {
        FileHandle.standardError.write(Data("\(path): \(error)\n".utf8))
        failed = true
    }
}
exit(failed ? 1 : 0)
