#!/bin/bash
find /app/willow -type f -name '*.md' > /app/feather_found.txt
