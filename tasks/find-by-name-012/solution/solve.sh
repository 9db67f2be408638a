#!/bin/bash
find /app/sage -type f -name '*.md' > /app/found.txt
