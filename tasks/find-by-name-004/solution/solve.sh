#!/bin/bash
find /app/granite -type f -name '*.csv' > /app/found.txt
