#!/bin/bash
find /app/velvet -type f -size +2000c > /app/large.txt
