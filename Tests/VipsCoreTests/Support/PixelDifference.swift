import VipsCore

/// The mean and maximum absolute difference per channel value of two
/// bitmaps of the same size and channels, for comparing a direct codec's
/// pixels with libvips'.
func pixelDifference(_ a: Bitmap, _ b: Bitmap) -> (mean: Double, max: Int) {
    let x = a.pixelData, y = b.pixelData
    var total = 0, maximum = 0
    for index in x.indices {
        let d = abs(Int(x[index]) - Int(y[index]))
        total += d
        maximum = max(maximum, d)
    }
    return (Double(total) / Double(max(1, x.count)), maximum)
}
