#!/bin/bash
echo 'ruby' > /app/gem.txt
