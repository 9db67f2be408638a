#!/bin/bash
find /app/sage -type f -name '*.md' > /app/cactus_found.txt
