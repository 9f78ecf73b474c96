from onnxroof.cli import main

main()
