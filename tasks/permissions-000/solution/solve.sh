#!/bin/bash
chmod 664 /app/feather/swift_sparrow.txt
chmod 600 /app/feather/lucky_violet.key
