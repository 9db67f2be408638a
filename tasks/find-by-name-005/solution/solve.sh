#!/bin/bash
find /app/desert -type f -name '*.md' > /app/found.txt
