#!/bin/bash
find /app/granite -type f -name '*.json' > /app/quartz_found.txt
