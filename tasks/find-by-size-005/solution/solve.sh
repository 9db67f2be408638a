#!/bin/bash
find /app/topaz -type f -size +3000c > /app/large.txt
