#!/bin/bash
find /app/desert -type f -name '*.md' > /app/oak_found.txt
