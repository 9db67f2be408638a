#!/bin/bash
find /app/granite -type f -name '*.json' > /app/found.txt
