import VipsBench
import VipsCore

extension ImagePlaceholder {
    /// `{"blurHash": …, "thumbHash": base64, "averageColour": "#rrggbb[aa]"}`:
    /// the "placeholder" field of `info --json` and `thumb --json` lines.
    var jsonObject: String {
        Terminal.jsonObject([
            ("blurHash", JSONText.string(blurHash)),
            ("thumbHash", JSONText.string(thumbHashBase64)),
            ("averageColour", JSONText.string(averageColourHex))
        ])
    }
}
