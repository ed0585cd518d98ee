import VipsCore
